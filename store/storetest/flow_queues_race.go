package storetest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// Concurrency limits that span queues (a tenant's for every queue, a
// default for every queue) and a queue's own hold when claimers of one
// queue, of the other and of both race: no tenant and no queue ever runs
// more than its limit.
func testLimitConcurrencyAcrossQueuesRace(t *testing.T, s store.Store) {
	const perQueue = 40
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Concurrency: 3})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant}, Concurrency: 2})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "q2"}, Concurrency: 4})
	limit := map[string]int{"a": 3, "b": 2, "c": 2, "q2": 4}
	tenants := []string{"a", "b", "c"}
	for _, tenant := range tenants {
		insertTenantQueue(t, s, tenant, "q1", perQueue)
		insertTenantQueue(t, s, tenant, "q2", perQueue)
	}
	total := perQueue * 2 * len(tenants)
	queues := [][]string{{"q1"}, {"q2"}, {"q1", "q2"}}
	var (
		mu      sync.Mutex
		running = map[string]int{}
		most    = map[string]int{}
		seen    = map[int64]int{}
		done    int
	)
	count := func(key string, d int) {
		running[key] += d
		most[key] = max(most[key], running[key])
	}
	err := parallel(8, func(g int) error {
		for {
			mu.Lock()
			finished := done >= total
			mu.Unlock()
			if finished {
				return nil
			}
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: queues[g%len(queues)],
				WorkerID: fmt.Sprint("w", g), Limit: 3, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				continue
			}
			fins := make([]*store.JobFinishParams, len(jobs))
			mu.Lock()
			for i, j := range jobs {
				seen[j.ID]++
				count(j.Tenant, 1)
				if j.Queue == "q2" {
					count("q2", 1)
				}
				fins[i] = completion(j, `1`, at(2*time.Second))
			}
			mu.Unlock()
			runtime.Gosched() // the handlers run: other claims overlap them
			mu.Lock()
			// Counted out before the finish commits: never more than ran.
			for _, j := range jobs {
				count(j.Tenant, -1)
				if j.Queue == "q2" {
					count("q2", -1)
				}
			}
			mu.Unlock()
			if err := finishEach(t, s, fins); err != nil {
				return err
			}
			mu.Lock()
			done += len(jobs)
			mu.Unlock()
		}
	})
	wantOK(t, "claimers", err)
	for key, n := range most {
		if n > limit[key] {
			t.Errorf("%s ran %d jobs at once, limit %d", key, n, limit[key])
		}
	}
	if len(seen) != total {
		t.Errorf("%d distinct jobs ran, want %d", len(seen), total)
	}
}
