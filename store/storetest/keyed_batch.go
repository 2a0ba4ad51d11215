package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Large keyed batches: a store may take a bulk path for them (pgstore
// copies a batch of new keys, and takes its general path when a key
// exists: copy_keyed.go); the answers are those of any batch.

func keyedBatchCases() []testCase {
	return []testCase{
		{"JobInsertMany/large_batch_of_new_keys", testKeyLargeBatchNew},
		{"JobInsertMany/large_batch_with_existing_reused_and_repeated_keys", testKeyLargeBatchMixed},
		{"Race/large_keyed_batches_overlapping", testRaceLargeKeyedBatches},
	}
}

// wantNewKeyed checks that item p was created as job j with p's key: the
// job as stored, and the record naming it with p's fingerprint and window.
func wantNewKeyed(t *testing.T, s store.Store, what string, r store.JobInsertResult, p *store.JobInsertParams, now time.Time) {
	t.Helper()
	if r.Err != nil || r.Existing || r.Job == nil {
		t.Fatalf("%s: %+v, want a new job", what, r)
	}
	j := r.Job
	stored := mustGet(t, s, j.ID)
	want := idemtype.StateAvailable
	if p.RunAt.After(now) {
		want = idemtype.StateScheduled
	}
	for _, row := range []*idemtype.JobRow{j, stored} {
		if row.State != want || row.Tenant != p.Tenant || row.Queue != p.Queue || row.Kind != p.Kind ||
			row.IdempotencyKey != p.IdempotencyKey || row.PartitionKey != p.PartitionKey {
			t.Fatalf("%s: job %+v, want state %s and the item's fields %+v", what, row, want, p)
		}
		wantTime(t, what+" CreatedAt", row.CreatedAt, now)
		wantTime(t, what+" RunAt", row.RunAt, p.RunAt)
	}
	if p.IdempotencyKey == "" {
		return
	}
	rec := record(t, s, p.Tenant, p.IdempotencyKey, now)
	if rec.JobID != j.ID || rec.Fingerprint != p.Fingerprint || rec.Status != idemtype.RecordInProgress {
		t.Errorf("%s: record job %d fingerprint %q status %s, want job %d, %q, in progress",
			what, rec.JobID, rec.Fingerprint, rec.Status, j.ID, p.Fingerprint)
	}
	if rec.DedupUntil == nil {
		t.Errorf("%s: record without a dedup window", what)
	} else {
		wantTime(t, what+" DedupUntil", *rec.DedupUntil, now.Add(p.DedupWindow))
	}
}

// testKeyLargeBatchNew: 90 items with new keys in two tenants (some
// partitioned, some scheduled, some keyless) are created, in item order,
// each with its record.
func testKeyLargeBatchNew(t *testing.T, s store.Store) {
	now := at(0)
	var ps []*store.JobInsertParams
	for i := range 90 {
		p := keyed(fmt.Sprintf("k%d", i%3), fmt.Sprintf("new-%03d", i), "fp")
		p.Tenant = []string{"tenant-a", "tenant-b"}[i%2]
		switch {
		case i%10 == 9:
			p.IdempotencyKey, p.Fingerprint, p.DedupWindow = "", "", 0
		case i%5 == 1:
			p.PartitionKey = "p1"
		case i%7 == 3:
			p.RunAt = at(time.Hour)
		}
		ps = append(ps, p)
	}
	res := insertAll(t, s, now, ps...)
	for i, r := range res {
		wantNewKeyed(t, s, fmt.Sprintf("item %d", i), r, ps[i], now)
		if i > 0 && r.Job.ID <= res[i-1].Job.ID {
			t.Errorf("item %d: id %d not above %d", i, r.Job.ID, res[i-1].Job.ID)
		}
	}
	if n := len(listAll(t, s, store.JobFilter{})); n != len(ps) {
		t.Errorf("%d jobs stored, want %d", n, len(ps))
	}
}

// testKeyLargeBatchMixed: one batch of 96 items holding new keys, keys in
// their window (same request: the existing job; another fingerprint:
// KeyReusedError), a key whose window has passed (a new job), keys
// repeated within the batch, keyless items and a key of another tenant.
func testKeyLargeBatchMixed(t *testing.T, s store.Store) {
	var prior []*store.JobInsertParams
	for i := range 10 {
		prior = append(prior, keyed("k", fmt.Sprintf("in-%d", i), "fp"))
	}
	prior = append(prior, keyed("k", "reused", "one"))
	old := keyed("k", "old", "fp")
	old.DedupWindow = time.Minute
	prior = append(prior, old)
	before := insertNew(t, s, at(0), prior...)

	now := at(10 * time.Minute)
	var ps []*store.JobInsertParams
	add := func(p *store.JobInsertParams) int {
		ps = append(ps, p)
		return len(ps) - 1
	}
	var fresh []int
	for i := range 70 {
		p := keyed("k", fmt.Sprintf("new-%02d", i), "fp")
		if i%6 == 2 {
			p.PartitionKey = "p"
		}
		fresh = append(fresh, add(p))
	}
	var in []int
	for i := range 10 {
		in = append(in, add(keyed("k", fmt.Sprintf("in-%d", i), "fp")))
	}
	reused := add(keyed("k", "reused", "two"))
	reopened := add(keyed("k", "old", "fp"))
	again := add(keyed("k", "new-03", "fp"))
	differs := add(keyed("k", "new-04", "other"))
	var plain []int
	for range 10 {
		plain = append(plain, add(newJob("plain")))
	}
	other := keyed("k", "in-0", "fp")
	other.Tenant = "tenant-b"
	otherTenant := add(other)

	res := insertAll(t, s, now, ps...)
	created := map[int64]bool{}
	for _, i := range append(append(append([]int{}, fresh...), plain...), reopened, otherTenant) {
		wantNewKeyed(t, s, fmt.Sprintf("item %d (%s)", i, ps[i].IdempotencyKey), res[i], ps[i], now)
		if created[res[i].Job.ID] {
			t.Errorf("item %d: job %d answered twice as new", i, res[i].Job.ID)
		}
		created[res[i].Job.ID] = true
	}
	for n, i := range in {
		wantExisting(t, fmt.Sprintf("item %d (in-%d)", i, n), res[i], before[n].ID, idemtype.StateAvailable)
	}
	wantKeyReused(t, "reused key", res[reused], "reused", before[10].ID)
	if res[reopened].Job.ID == before[11].ID {
		t.Errorf("key past its window answered with its old job %d", before[11].ID)
	}
	wantExisting(t, "repeated key", res[again], res[fresh[3]].Job.ID, idemtype.StateAvailable)
	wantKeyReused(t, "repeated key, other fingerprint", res[differs], "new-04", res[fresh[4]].Job.ID)
	if n, want := len(listAll(t, s, store.JobFilter{})), len(prior)+len(created); n != want {
		t.Errorf("%d jobs stored, want %d", n, want)
	}
}

// testRaceLargeKeyedBatches: 8 goroutines insert batches of 100 keys
// drawn from 300, each goroutine's batches starting at a different offset
// and in its own order (KeyOrder), so that every batch meets keys that
// exist, keys another batch is inserting in the same instant and keys
// nobody has; 4 rounds of fresh keys. Overlap: each round's goroutines
// start together on a barrier (parallel). Every key gets exactly one job,
// every answer for a key names that job, no batch fails, and each key's
// record names its job.
func testRaceLargeKeyedBatches(t *testing.T, s store.Store) {
	const (
		goroutines = 8
		rounds     = 4
		keys       = 300
		perBatch   = 100
		batches    = 3
	)
	var answers keyAnswers
	for round := range rounds {
		err := parallel(goroutines, func(g int) error {
			for b := range batches {
				var ps []*store.JobInsertParams
				for _, i := range KeyOrder(g, round*batches+b, perBatch) {
					k := (g*37 + b*perBatch + i) % keys
					ps = append(ps, keyed("k", fmt.Sprintf("r%d-key-%03d", round, k), "fp"))
				}
				res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps, Now: at(0)})
				if err == nil {
					err = answers.add(ps, res)
				}
				if err != nil {
					return fmt.Errorf("round %d batch %d: %w", round, b, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	created, seen := answers.created, answers.jobs
	if created != len(seen) {
		t.Errorf("%d jobs created for %d keys", created, len(seen))
	}
	for k, ids := range seen {
		if len(ids) != 1 {
			t.Errorf("key %s answered with %d different jobs", k, len(ids))
			continue
		}
		for id := range ids {
			if r := record(t, s, "default", k, at(0)); r.JobID != id {
				t.Errorf("key %s: record names job %d, answers job %d", k, r.JobID, id)
			}
		}
	}
	if n := len(listAll(t, s, store.JobFilter{})); n != len(seen) {
		t.Errorf("%d jobs stored for %d keys", n, len(seen))
	}
}
