package pgstore

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestKeyHeldSeesLeaseCommittedAfterSnapshot: the claim's reading of a
// job's key record (claimCTEs' kh) must see a lease that another owner
// took while the job was still available and committed after the claim's
// statement began but before it locked the job. The claim here is
// claimCTEs behind a candidate scan that waits, after the statement's
// snapshot and before locking the job, for an advisory lock the test
// holds; the other owner's RecordAcquire commits while it waits. key_held
// must be false (a FOR KEY SHARE lock, or a plain read, reports the
// snapshot's free record: true).
func TestKeyHeldSeesLeaseCommittedAfterSnapshot(t *testing.T) {
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	p := benchJob()
	p.RunAt, p.IdempotencyKey, p.Fingerprint, p.DedupWindow = now, "K", "fp", time.Hour
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}, Now: now})
	if err != nil || res[0].Err != nil {
		t.Fatalf("insert: %v %+v", err, res)
	}
	id := res[0].Job.ID
	gate, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Release()
	const lockKey = 424242
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	q := s.sql(`WITH cand AS (
    SELECT j.id FROM {schema}.jobs j
    WHERE j.id = $1 AND (SELECT 1 FROM pg_advisory_xact_lock_shared($5::bigint)) = 1
    FOR UPDATE SKIP LOCKED
), ` + claimCTEs("$2", "$3", "$4", "$6") + `
SELECT id, key_held FROM upd`)
	type claimed struct {
		id   int64
		held bool
		err  error
	}
	done := make(chan claimed, 1)
	go func() {
		var c claimed
		c.err = s.pool.QueryRow(ctx, q, id, now, now.Add(time.Minute), "w", lockKey, "").Scan(&c.id, &c.held)
		done <- c
	}()
	waitAdvisoryWaiter(t, s, lockKey) // the claim's snapshot is taken then
	r, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: "do:other",
		LeaseUntil: now.Add(time.Hour), DedupUntil: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour), Now: now})
	if err != nil || !r.Acquired {
		t.Fatalf("the other owner's acquire of the waiting job's key: %v %+v", err, r)
	}
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	c := <-done
	if c.err != nil {
		t.Fatal(c.err)
	}
	if c.id != id || c.held {
		t.Fatalf("claimed job %d key_held %v; want job %d, not held (the other owner's lease committed first)", c.id, c.held, id)
	}
}
