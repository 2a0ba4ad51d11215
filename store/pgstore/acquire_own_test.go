package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestAcquireOwnReadMatchesFullStatement: acquiring a claim's keys with the
// read of the jobs' own keys first (acquireSet's default) decides every
// kind of key as the full statement alone does — a running job's own key,
// a key whose record names another running job, an own key whose job's
// lease has lapsed, a key without a record, a key leased by a Do caller,
// a completed key — each in one mixed batch, on two identical schemas.
func TestAcquireOwnReadMatchesFullStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	type outcome struct {
		acquired bool
		status   string
		jobID    int64
		owner    string
	}
	run := func(fullOnly bool) []outcome {
		s := newTestStoreCfg(t, 4, &Config{})
		s.acquireFullOnly = fullOnly
		insert := func(key string) {
			t.Helper()
			_, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Now: now, Jobs: []*store.JobInsertParams{{
				Tenant: "t", Queue: "q", Kind: "k", Args: []byte("{}"), MaxAttempts: 3, RunAt: now,
				IdempotencyKey: key, DedupWindow: time.Hour, ResultTTL: time.Hour}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		claim := func(lease time.Time) int64 {
			t.Helper()
			got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1, LeaseUntil: lease, Now: now})
			if err != nil || len(got) != 1 {
				t.Fatal(err, len(got))
			}
			return got[0].ID
		}
		insert("own")
		own := claim(now.Add(time.Minute))
		insert("other")
		other := claim(now.Add(time.Minute))
		insert("lapsed")
		lapsed := claim(now.Add(-time.Second))
		doOwner := "do:x"
		if res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "do", Owner: doOwner,
			LeaseUntil: now.Add(time.Minute), DedupUntil: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour), Now: now}); err != nil || !res.Acquired {
			t.Fatal(err, res)
		}
		if res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "done", Owner: doOwner,
			LeaseUntil: now.Add(time.Minute), DedupUntil: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour), Now: now}); err != nil || !res.Acquired {
			t.Fatal(err, res)
		}
		if err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "t", Key: "done", Owner: doOwner,
			Result: []byte(`1`), TTL: time.Hour, Now: now}); err != nil {
			t.Fatal(err)
		}
		ask := func(key string, job int64) *store.RecordAcquireParams {
			return &store.RecordAcquireParams{Tenant: "t", Key: key, Owner: store.JobOwner(job), JobID: job,
				LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now}
		}
		// other's key asked for by the own job's id: the record names other.
		ps := []*store.RecordAcquireParams{ask("own", own), ask("other", own+100), ask("lapsed", lapsed),
			ask("new", other), ask("do", other), ask("done", other)}
		res, err := s.RecordAcquireMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]outcome, len(res))
		for i, r := range res {
			out[i] = outcome{acquired: r.Acquired, status: string(r.Record.Status), jobID: r.Record.JobID, owner: r.Record.LeaseOwner}
		}
		return out
	}
	withRead, full := run(false), run(true)
	names := []string{"own", "other's record", "lapsed own", "new", "Do lease", "completed"}
	for i := range full {
		if withRead[i] != full[i] {
			t.Errorf("%s: with the own read %+v, full statement %+v", names[i], withRead[i], full[i])
		}
	}
	if !full[0].acquired || full[1].acquired || !full[3].acquired || full[4].acquired || full[5].acquired {
		t.Errorf("outcomes %s", fmt.Sprint(full))
	}
}
