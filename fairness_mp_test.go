package idem_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestFairnessBigBacklogThreeClients: three clients (4 workers each, one
// store each on one SQLite file / one PostgreSQL schema) drain a tenant
// with a 10,000-job backlog; once they are busy with it, a tenant enqueues
// 10 jobs. Each claim rotates among the tenants with work
// (docs/flow-control.md, "Fairness"), so each claimer gives the big
// tenant at most one turn per turn of the small one: the small tenant's
// 10 jobs all start before the big tenant starts 10 more per claimer, plus
// the claims that were in flight when the small jobs came (one per
// worker); also under a queue concurrency of 6. The test counts the big tenant's starts in between.
func TestFairnessBigBacklogThreeClients(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres", "sqlite-limited", "postgres-limited"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			backend, limited, _ := strings.Cut(name, "-")
			const big, small, procs, perProc = 10000, 10, 3, 4
			var (
				mu        sync.Mutex
				bigStarts int
				marked    = -1 // bigStarts once the small jobs were enqueued
				smallDone = make(chan int, small)
				busy      = make(chan struct{})
				busyOnce  sync.Once
			)
			workers := idem.NewWorkers()
			idem.AddWorker(workers, idem.WorkFunc[SendArgs](func(ctx context.Context, j *idem.Job[SendArgs]) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				switch j.Tenant {
				case "big":
					bigStarts++
					if bigStarts == 100 {
						busyOnce.Do(func() { close(busy) })
					}
				case "small":
					smallDone <- bigStarts
				}
				return nil, nil
			}))
			stores := sharedStores(t, backend, procs)
			c, err := idem.NewClient(stores[0], &idem.Config{DisableMaintenance: true, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if limited != "" {
				// A queue concurrency below the workers: the claims take the limited paths.
				if _, err := c.LimitPut(context.Background(), idem.Limit{FlowScope: idem.FlowScope{Queue: idem.DefaultQueue}, Concurrency: 6}); err != nil {
					t.Fatal(err)
				}
			}
			enqueueTenant(t, c, "big", big)
			startClients(t, stores, idem.Config{Workers: workers, Queues: queues(perProc), PollInterval: 5 * time.Millisecond})
			select {
			case <-busy:
			case <-time.After(waitTimeout):
				t.Fatal("the big tenant's jobs did not start")
			}
			enqueueTenant(t, c, "small", small)
			mu.Lock()
			marked = bigStarts // the small jobs are committed
			mu.Unlock()
			last := 0
			for range small {
				select {
				case n := <-smallDone:
					last = max(last, n)
				case <-time.After(waitTimeout):
					t.Fatal("the small tenant's jobs did not all start")
				}
			}
			between := last - marked
			bound := small*procs + procs*perProc
			t.Logf("%s: the big tenant started %d jobs after the small tenant's enqueue returned and before its last start (bound %d; %d big started before)",
				name, between, bound, marked)
			if between > bound {
				t.Errorf("the big tenant started %d jobs while the small tenant's 10 waited; want at most %d", between, bound)
			}
		})
	}
}

// TestFairnessUnderQueueConcurrency: three clients (8 workers each, one
// store each on one SQLite file / one PostgreSQL schema) work three
// tenants' equal backlogs in a queue with a concurrency of 3, every tenant
// at most 2 at once. A claim whose queue-wide room runs out before a
// listed tenant's turn must not move the rotation past that tenant, or the
// tenant listed last never gets a turn (it got none of the first 300
// starts: acme took 200, beta 100). Each tenant gets at least a third of
// its fair share of the first 300 starts.
func TestFairnessUnderQueueConcurrency(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			const starts, perTenant = 300, 1000
			tenants := []string{"acme", "beta", "gamma"}
			var (
				mu   sync.Mutex
				per  = map[string]int{}
				n    int
				done = make(chan struct{})
			)
			workers := idem.NewWorkers()
			idem.AddWorker(workers, idem.WorkFunc[SendArgs](func(ctx context.Context, j *idem.Job[SendArgs]) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				if n++; n <= starts {
					per[j.Tenant]++
					if n == starts {
						close(done)
					}
				}
				return nil, nil
			}))
			stores := sharedStores(t, backend, 3)
			c, err := idem.NewClient(stores[0], &idem.Config{DisableMaintenance: true, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for _, l := range []idem.Limit{
				{FlowScope: idem.FlowScope{Queue: idem.DefaultQueue}, Concurrency: 3},
				{FlowScope: idem.FlowScope{Tenant: idem.EveryTenant}, Concurrency: 2},
			} {
				if _, err := c.LimitPut(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			for _, tenant := range tenants {
				enqueueTenant(t, c, tenant, perTenant)
			}
			startClients(t, stores, idem.Config{Workers: workers, Queues: queues(8), PollInterval: 5 * time.Millisecond})
			select {
			case <-done:
			case <-time.After(waitTimeout):
				t.Fatalf("fewer than %d jobs started", starts)
			}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%s: the first %d starts by tenant: %v", backend, starts, per)
			for _, tenant := range tenants {
				if per[tenant] < starts/len(tenants)/3 {
					t.Errorf("tenant %s started %d of the first %d jobs (equal backlogs of %d tenants): %v", tenant, per[tenant], starts, len(tenants), per)
				}
			}
		})
	}
}
