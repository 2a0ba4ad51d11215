package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/idem-dev/idem/store"
)

// KeyOrder is the order in which goroutine g sends the keys of one round.
// A third of the goroutines send them ascending, a third descending, a
// third shuffled (seeded by goroutine and round, so a failure replays), so
// every pair of batches on the same keys is likely to meet in opposite
// orders. (One pgstore Store combines concurrent batches into one group
// transaction; the cross-store race of pgstore's TestKeyLockOrderAcrossStores
// is the one that deadlocks a store locking keys in item order.)
func KeyOrder(g, round, n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	switch g % 3 {
	case 1:
		slices.Reverse(order)
	case 2:
		r := rand.New(rand.NewPCG(uint64(g), uint64(round)))
		r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order
}

// testRaceKeyOrders: 12 goroutines insert the same 60 keys (30 in each of
// two tenants, the same key names in both) in one batch each, in ascending,
// descending or shuffled order, over 6 rounds of fresh keys. Overlap: every
// round starts its goroutines together on a barrier (parallel), and all of
// them contend for the same fresh keys. Each (tenant, key) gets exactly one
// job, every goroutine is answered with that job, and no batch fails (a
// deadlock, SQLSTATE 40P01 on PostgreSQL, is a failed batch).
func testRaceKeyOrders(t *testing.T, s store.Store) {
	const (
		goroutines = 12
		rounds     = 6
		perTenant  = 30
	)
	tenants := []string{"tenant-a", "tenant-b"}
	var mu sync.Mutex
	seen := map[[2]string]map[int64]bool{}
	created := 0
	for round := range rounds {
		err := parallel(goroutines, func(g int) error {
			var ps []*store.JobInsertParams
			for _, i := range KeyOrder(g, round, perTenant*len(tenants)) {
				p := keyed("k", fmt.Sprintf("r%d-key-%02d", round, i%perTenant), "fp")
				p.Tenant = tenants[i/perTenant]
				ps = append(ps, p)
			}
			res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps, Now: at(0)})
			if err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
			if len(res) != len(ps) {
				return fmt.Errorf("%d results for %d items", len(res), len(ps))
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range res {
				if r.Err != nil {
					return fmt.Errorf("round %d item %d: %w", round, i, r.Err)
				}
				if r.Job.Tenant != ps[i].Tenant {
					return fmt.Errorf("item %d of tenant %s answered with a job of tenant %s", i, ps[i].Tenant, r.Job.Tenant)
				}
				k := [2]string{ps[i].Tenant, ps[i].IdempotencyKey}
				if seen[k] == nil {
					seen[k] = map[int64]bool{}
				}
				seen[k][r.Job.ID] = true
				if !r.Existing {
					created++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := rounds * perTenant * len(tenants)
	if created != want || len(seen) != want {
		t.Errorf("%d jobs created for %d keys seen, want %d of each", created, len(seen), want)
	}
	for k, ids := range seen {
		if len(ids) != 1 {
			t.Errorf("key %v answered with %d different jobs", k, len(ids))
		}
	}
	if jobs := listAll(t, s, store.JobFilter{}); len(jobs) != want {
		t.Errorf("%d jobs stored, want %d", len(jobs), want)
	}
}
