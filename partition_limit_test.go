package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestPartitionHeadHeldByLimitThreeClients: three clients (one store each
// on one SQLite file / one PostgreSQL schema) work a queue with a
// concurrency of 3 where tenant acme may run 1 job at once. acme's first
// job blocks until the test releases it, so the head of acme's partition p
// (enqueued after it) is held back by acme's limit. Tenant beta's own
// partition p (partitions belong to their tenant) and its other jobs all
// complete meanwhile: a head held by a limit blocks only its own
// partition. Once released, acme's partition runs in enqueue order, acme
// never runs 2 at once and the queue never runs more than 3.
func TestPartitionHeadHeldByLimitThreeClients(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var (
				mu                sync.Mutex
				running, acmeRun  int
				mostAll, mostAcme int
				order             []int64 // acme's partition jobs, as they start
				release           = make(chan struct{})
				blockerStarted    = make(chan struct{})
			)
			type args struct {
				Blocker bool `json:"blocker"`
			}
			workers := idem.NewWorkers()
			idem.AddWorker(workers, idem.WorkFunc[SendArgs](func(ctx context.Context, j *idem.Job[SendArgs]) (any, error) {
				var a args
				if err := json.Unmarshal(j.JobRow.Args, &a); err != nil {
					return nil, idem.JobPermanent(err)
				}
				mu.Lock()
				running++
				mostAll = max(mostAll, running)
				if j.Tenant == "acme" {
					acmeRun++
					mostAcme = max(mostAcme, acmeRun)
					if j.PartitionKey != "" {
						order = append(order, j.ID)
					}
				}
				mu.Unlock()
				if a.Blocker {
					close(blockerStarted)
					<-release
				}
				mu.Lock()
				running--
				if j.Tenant == "acme" {
					acmeRun--
				}
				mu.Unlock()
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
				{FlowScope: idem.FlowScope{Tenant: "acme"}, Concurrency: 1},
			} {
				if _, err := c.LimitPut(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			enqueue := func(tenant, partition string, blocker bool) int64 {
				t.Helper()
				res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "send", Args: json.RawMessage(fmt.Sprintf(`{"blocker":%v}`, blocker)),
					Opts: &idem.EnqueueOpts{Tenant: tenant, PartitionKey: partition}})
				if err != nil {
					t.Fatal(err)
				}
				return res.Job.ID
			}
			var all, acmePart, beta []int64
			all = append(all, enqueue("acme", "", true))
			for range 4 {
				id := enqueue("acme", "p", false)
				acmePart, all = append(acmePart, id), append(all, id)
			}
			for i := range 10 {
				part := ""
				if i%2 == 0 {
					part = "p"
				}
				id := enqueue("beta", part, false)
				beta, all = append(beta, id), append(all, id)
			}
			startClients(t, stores, idem.Config{Workers: workers, Queues: queues(4), PollInterval: 5 * time.Millisecond})
			select {
			case <-blockerStarted:
			case <-time.After(waitTimeout):
				t.Fatal("acme's blocker did not start")
			}
			for _, r := range waitAll(t, c, beta, waitTimeout) {
				if r.State != idem.StateCompleted {
					t.Errorf("beta's job %d: %s while acme's partition head waits", r.ID, r.State)
				}
			}
			mu.Lock()
			early := len(order)
			mu.Unlock()
			if early != 0 {
				t.Errorf("%d of acme's partition jobs started while its limit of 1 was held", early)
			}
			close(release)
			for _, r := range waitAll(t, c, all, waitTimeout) {
				if r.State != idem.StateCompleted {
					t.Errorf("job %d: %s", r.ID, r.State)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(order) != fmt.Sprint(acmePart) {
				t.Errorf("acme's partition started in order %v, enqueued %v", order, acmePart)
			}
			if mostAcme > 1 || mostAll > 3 {
				t.Errorf("most running: acme %d (limit 1), queue %d (limit 3)", mostAcme, mostAll)
			}
			t.Logf("%s: most running acme %d (limit 1), queue %d (limit 3); beta's 10 jobs completed while acme's partition head waited", backend, mostAcme, mostAll)
		})
	}
}
