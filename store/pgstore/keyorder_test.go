package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// TestKeyLockOrderAcrossStores: eight stores on one schema (eight
// processes, as far as PostgreSQL is concerned: no shared group commit)
// insert the same 500 fresh keys of two tenants per round, each store in its
// own order — ascending, descending or shuffled. Overlap: each round's
// inserters wait on one barrier, and every connection is opened before the
// first round. Keys locked in one global order never deadlock: every batch
// succeeds and each (tenant, key) has one job. Locking in item order
// deadlocks (SQLSTATE 40P01) and fails batches.
func TestKeyLockOrderAcrossStores(t *testing.T) {
	t.Parallel()
	const (
		stores    = 8
		rounds    = 6
		perTenant = 250 // 500 items a batch: statements long enough to overlap
	)
	url, schema := dbtest.NewSchema(t)
	ss := make([]*Store, stores)
	for i := range ss {
		s, err := Open(context.Background(), withPoolSize(url, 2), &Config{Schema: schema, SkipMigrate: i > 0})
		if err != nil {
			t.Fatalf("open store %d: %v", i, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.pool.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		ss[i] = s
	}
	tenants := []string{"tenant-a", "tenant-b"}
	var mu sync.Mutex
	seen := map[[2]string]map[int64]bool{}
	for round := range rounds {
		start := make(chan struct{})
		errs := make([]error, stores)
		var wg sync.WaitGroup
		for g := range stores {
			wg.Go(func() {
				var ps []*store.JobInsertParams
				for _, i := range storetest.KeyOrder(g, round, perTenant*len(tenants)) {
					p := job("k")
					p.Tenant = tenants[i/perTenant]
					p.IdempotencyKey = fmt.Sprintf("r%d-key-%03d", round, i%perTenant)
					p.Fingerprint, p.DedupWindow = "fp", 3600e9
					ps = append(ps, p)
				}
				<-start
				res, err := ss[g].JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps})
				if err != nil {
					errs[g] = err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i, r := range res {
					if r.Err != nil {
						errs[g] = r.Err
						return
					}
					k := [2]string{ps[i].Tenant, ps[i].IdempotencyKey}
					if seen[k] == nil {
						seen[k] = map[int64]bool{}
					}
					seen[k][r.Job.ID] = true
				}
			})
		}
		close(start)
		wg.Wait()
		for g, err := range errs {
			if err != nil {
				t.Fatalf("round %d, store %d: %v", round, g, err)
			}
		}
	}
	if want := rounds * perTenant * len(tenants); len(seen) != want {
		t.Fatalf("%d keys answered, want %d", len(seen), want)
	}
	for k, ids := range seen {
		if len(ids) != 1 {
			t.Fatalf("key %v answered with %d jobs", k, len(ids))
		}
	}
}
