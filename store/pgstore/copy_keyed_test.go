package pgstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// keyedBatch returns n keyed jobs with keys prefix-000…, fingerprint fp.
func keyedBatch(prefix string, n int, fp string) []*store.JobInsertParams {
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = benchJob()
		ps[i].IdempotencyKey = fmt.Sprintf("%s-%03d", prefix, i)
		ps[i].Fingerprint, ps[i].DedupWindow = fp, time.Hour
	}
	return ps
}

// TestKeyedCopyPaths: a large batch of new keys is copied; one whose last
// key (in lock order) exists rolls back to the savepoint and takes the
// general path, answering the existing key with its job and creating the
// others; racing batches of the same new keys create each job once, some
// of them copying and the ones that met a committed key retrying. (The
// answers in every case are the conformance suite's: storetest's large
// keyed batches.)
func TestKeyedCopyPaths(t *testing.T) {
	s := newTestStore(t, 16)
	ctx := t.Context()
	insert := func(ps []*store.JobInsertParams) []store.JobInsertResult {
		t.Helper()
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Job == nil {
				t.Fatalf("item %d: %+v", i, r)
			}
		}
		return res
	}

	insert(keyedBatch("a", 80, "fp"))
	if c, r := s.keyedCopied.Load(), s.keyedCopyRetried.Load(); c != 1 || r != 0 {
		t.Fatalf("batch of new keys: %d copied, %d retried; want 1, 0", c, r)
	}

	last := insert(keyedBatch("b", 1, "fp"))[0].Job.ID // b-000 sorts after every a-…
	ps := append(keyedBatch("a2", 79, "fp"), keyedBatch("b", 1, "fp")...)
	res := insert(ps)
	if c, r := s.keyedCopied.Load(), s.keyedCopyRetried.Load(); c != 1 || r != 1 {
		t.Fatalf("batch with an existing key: %d copied, %d retried; want 1, 1", c, r)
	}
	for i, r := range res[:79] {
		if r.Existing {
			t.Errorf("new key %d answered as existing", i)
		}
	}
	if r := res[79]; !r.Existing || r.Job.ID != last {
		t.Errorf("existing key: %+v, want existing job %d", r, last)
	}

	const racers = 6
	var mu sync.Mutex
	jobOf := map[string]map[int64]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range racers {
		wg.Go(func() {
			<-start
			res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: keyedBatch("race", 100, "fp")})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			for i, r := range res {
				if r.Err != nil || r.Job == nil {
					t.Errorf("item %d: %+v", i, r)
					continue
				}
				k := r.Job.IdempotencyKey
				if jobOf[k] == nil {
					jobOf[k] = map[int64]bool{}
				}
				jobOf[k][r.Job.ID] = true
			}
		})
	}
	close(start)
	wg.Wait()
	if len(jobOf) != 100 {
		t.Errorf("%d keys answered, want 100", len(jobOf))
	}
	for k, ids := range jobOf {
		if len(ids) != 1 {
			t.Errorf("key %s answered with %d jobs", k, len(ids))
		}
	}
	var n int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM {schema}.jobs WHERE idempotency_key LIKE 'race-%'`)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Errorf("%d jobs of the racing keys stored, want 100", n)
	}
	c, r := s.keyedCopied.Load()-1, s.keyedCopyRetried.Load()-1
	if c < 1 || r < 1 || c+r != racers {
		t.Errorf("racing batches: %d copied, %d retried; want at least one of each, %d in all", c, r, racers)
	}
}
