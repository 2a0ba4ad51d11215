package sqlitestore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestClaimCountsRunningJobsOfEachScope: a concurrency limit counts the
// running jobs of its scope and no others, whether the claim counts scope
// by scope (a few limits) or every running job at once (many limits).
func TestClaimCountsRunningJobsOfEachScope(t *testing.T) {
	t.Parallel()
	for _, scope := range []store.FlowScope{{Tenant: "a"}, {Queue: "q"}, {Tenant: "a", Queue: "q"}} {
		for _, others := range []int{0, runningScopesMax} {
			t.Run(fmt.Sprintf("%+v/%d other limits", scope, others), func(t *testing.T) {
				t.Parallel()
				testRunningOfScope(t, scope, others)
			})
		}
	}
}

func testRunningOfScope(t *testing.T, scope store.FlowScope, others int) {
	ctx := context.Background()
	s := openTest(t, nil)
	putLimit(t, s, store.Limit{FlowScope: scope, Concurrency: 2})
	for i := range others { // concurrency limits of tenants without work
		putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: fmt.Sprintf("idle%02d", i)}, Concurrency: 1})
	}
	// Running jobs of every (tenant, queue) the scope does not cover, two
	// each.
	var outside []*store.JobInsertParams
	for _, tenant := range []string{"a", "b"} {
		for _, queue := range []string{"q", "other"} {
			if (scope.Tenant == "" || scope.Tenant == tenant) && (scope.Queue == "" || scope.Queue == queue) {
				continue
			}
			for range 2 {
				outside = append(outside, &store.JobInsertParams{Tenant: tenant, Queue: queue, Kind: "flow",
					Args: []byte(`{}`), MaxAttempts: 1, RunAt: t0})
			}
		}
	}
	insert(t, s, t0, outside...)
	claimOf := func(tenant, queue string, limit int) []*idemtype.JobRow {
		t.Helper()
		jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, Tenant: tenant, WorkerID: "w",
			Limit: limit, LeaseUntil: t0.Add(time.Minute), Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	for _, p := range outside {
		claimOf(p.Tenant, p.Queue, 10)
	}
	var in []*store.JobInsertParams
	for range 5 {
		in = append(in, &store.JobInsertParams{Tenant: "a", Queue: "q", Kind: "flow", Args: []byte(`{}`), MaxAttempts: 1, RunAt: t0})
	}
	insert(t, s, t0, in...)
	jobs := claimOf("a", "q", 10)
	if len(jobs) != 2 {
		t.Fatalf("claimed %d under concurrency 2, want 2 (running outside the scope must not count)", len(jobs))
	}
	if got := len(claimOf("a", "q", 10)); got != 0 {
		t.Fatalf("claimed %d with the scope's 2 running", got)
	}
	finish(t, s, jobs[0], idemtype.StateCompleted, t0)
	if got := len(claimOf("a", "q", 10)); got != 1 {
		t.Fatalf("claimed %d after one of 2 finished, want 1", got)
	}
}
