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

// TestNextTenants: the tenant skip scan returns at most k tenants with
// claimable work, in order, after the cursor and up to upTo, without the
// excluded ones and of the given kinds only; the same statement serves
// every k.
func TestNextTenants(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	var ps []*store.JobInsertParams
	for _, tenant := range []string{"a", "b", "c", "d", "e"} {
		for range 3 {
			p := job("k")
			if tenant == "d" {
				p.Kind = "k2"
			}
			p.Tenant = tenant
			ps = append(ps, p)
		}
	}
	insert(t, s, t0, ps...)
	now := toUS(t0)
	for _, c := range []struct {
		kinds       []string
		after, upTo string
		excluded    []string
		k           int
		want        string
	}{
		{nil, "", "", nil, 2, "[a b]"},
		{nil, "", "", nil, 10, "[a b c d e]"},
		{nil, "b", "", nil, 10, "[c d e]"},
		{nil, "b", "", nil, 1, "[c]"},
		{nil, "", "c", nil, 10, "[a b c]"},
		{nil, "", "", []string{"b"}, 2, "[a c]"},
		{[]string{"k2"}, "", "", nil, 10, "[d]"},
		{[]string{"k", "k2"}, "c", "", nil, 5, "[d e]"},
		{nil, "e", "", nil, 3, "[]"},
	} {
		var got []string
		err := s.write(context.Background(), 1, func(w *wtx) error {
			var err error
			got, err = nextTenants(w, c.kinds, "default", now, c.after, c.upTo, c.excluded, c.k)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("kinds %v after %q up to %q excluding %v, k %d: %v, want %s", c.kinds, c.after, c.upTo, c.excluded, c.k, got, c.want)
		}
	}
}
