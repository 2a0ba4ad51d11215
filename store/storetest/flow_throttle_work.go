package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// throttleWorkCases: a claim counts as throttled by a limit (Report, and
// the limit's Throttled count) only when the limit held back a job the
// claim could otherwise have taken: one of the claimed queue, of the
// claim's kinds, in the limit's scope (of the claim's tenant, when it
// names one), due now. A spent limit over an empty queue throttles
// nothing: an idle worker polling a tenant whose rate is used up was
// told "throttled" on every poll, and the limit's count rose with each.
func throttleWorkCases() []testCase {
	var out []testCase
	for _, c := range throttleWorkScopes {
		for _, conc := range []bool{false, true} {
			kind := "rate"
			if conc {
				kind = "concurrency"
			}
			out = append(out, testCase{"Limits/spent_" + kind + "_throttles_only_with_work_" + c.name, func(t *testing.T, s store.Store) {
				testThrottleOnlyWithWork(t, s, c.scope, conc)
			}})
		}
	}
	return out
}

// throttleWorkScopes are the scopes of the limits testThrottleOnlyWithWork
// spends: the queue's, the tenant's (every queue, and in the queue), and
// the defaults of tenant "*" (in the queue, and every queue).
var throttleWorkScopes = []struct {
	name  string
	scope store.FlowScope
}{
	{"queue", store.FlowScope{Queue: "q"}},
	{"tenant", store.FlowScope{Tenant: "a"}},
	{"tenant_in_queue", store.FlowScope{Tenant: "a", Queue: "q"}},
	{"default_in_queue", store.FlowScope{Tenant: store.EveryTenant, Queue: "q"}},
	{"default", store.FlowScope{Tenant: store.EveryTenant}},
}

// RunThrottleWork runs the cases of throttling counted only with work held
// back (also part of Run), each on its own store from newStore: a backend
// with several claim paths runs them once per path.
func RunThrottleWork(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	runCases(t, throttleWorkCases(), newStore)
}

// testThrottleOnlyWithWork spends a limit of scope (a rate of 1 an hour,
// or a concurrency of 1 held by a running job) with tenant a's only job of
// queue q, then polls q for kind k: while nothing claimable is left in the
// limit's scope (a job of another kind, one due later, one in another
// queue) no poll is throttled and the limit counts nothing; once a job
// waits, every poll is throttled (a spent rate reports its window's end)
// and counts one on the limit, except the polls of another tenant (b),
// whom the limit holds nothing back of.
func testThrottleOnlyWithWork(t *testing.T, s store.Store, scope store.FlowScope, conc bool) {
	l := store.Limit{FlowScope: scope, Rate: 1, Period: time.Hour}
	if conc {
		l = store.Limit{FlowScope: scope, Concurrency: 1}
	}
	putLimit(t, s, l)
	job := func(kind, queue string, runAt time.Time) *store.JobInsertParams {
		p := newJob(kind)
		p.Tenant, p.Queue, p.RunAt = "a", queue, runAt
		return p
	}
	poll := func(now time.Time, tenant string) ([]*idemtype.JobRow, store.ClaimReport) {
		t.Helper()
		var rep store.ClaimReport
		jobs := claimWith(t, s, &store.JobClaimParams{Tenant: tenant, Queues: []string{"q"}, Kinds: []string{"k"},
			WorkerID: "w1", Limit: 1, LeaseUntil: now.Add(lease), Now: now, Report: &rep})
		return jobs, rep
	}
	throttled := func(now time.Time) int64 { t.Helper(); return throttledOf(t, s, scope, now) }
	insertNew(t, s, at(0), job("k", "q", at(0)))
	if jobs, _ := poll(at(time.Second), ""); len(jobs) != 1 {
		t.Fatalf("first claim took %d jobs, want a's one", len(jobs))
	}
	// Spent, and nothing of q left: idle polls.
	for i := range 2 {
		now := at(time.Duration(2+i) * time.Second)
		if jobs, rep := poll(now, ""); len(jobs) != 0 || rep.Throttled || !rep.NextRefill.IsZero() {
			t.Fatalf("idle poll %d under the spent limit took %d jobs, report %+v; want nothing, not throttled", i, len(jobs), rep)
		}
	}
	if n := throttled(at(3 * time.Second)); n != 0 {
		t.Fatalf("the spent limit counted %d throttled claims of an empty queue, want 0", n)
	}
	// Work the claims could not take anyway: another kind, not due yet,
	// another queue.
	insertNew(t, s, at(0), job("other", "q", at(0)), job("k", "q", at(30*time.Minute)), job("k", "r", at(0)))
	if jobs, rep := poll(at(4*time.Second), ""); len(jobs) != 0 || rep.Throttled {
		t.Fatalf("poll with no claimable job of q took %d jobs, report %+v; want nothing, not throttled", len(jobs), rep)
	}
	if n := throttled(at(4 * time.Second)); n != 0 {
		t.Fatalf("the spent limit counted %d throttled claims without claimable work, want 0", n)
	}
	// A job of a waits: each poll is held back by the limit.
	insertNew(t, s, at(0), job("k", "q", at(0)))
	for i := range 2 {
		now := at(time.Duration(5+i) * time.Second)
		jobs, rep := poll(now, "")
		wantRefill := time.Time{}
		if !conc {
			wantRefill = l.WindowAt(now).Add(time.Hour)
		}
		if len(jobs) != 0 || !rep.Throttled || !rep.NextRefill.Equal(wantRefill) {
			t.Fatalf("poll %d with a's job waiting took %d jobs, report %+v; want nothing, throttled, refill %v", i, len(jobs), rep, wantRefill)
		}
		if n := throttled(now); n != int64(i+1) {
			t.Fatalf("after %d throttled polls the limit counts %d throttled claims", i+1, n)
		}
	}
	// Tenant b's poll: the limit holds none of b's work back.
	if jobs, rep := poll(at(7*time.Second), "b"); len(jobs) != 0 || rep.Throttled {
		t.Fatalf("tenant b's poll took %d jobs, report %+v; want nothing, not throttled", len(jobs), rep)
	}
	if n := throttled(at(7 * time.Second)); n != 2 {
		t.Fatalf("after tenant b's poll the limit counts %d throttled claims, want 2", n)
	}
}

// testThrottlePartlySpent (in flowCases: only the general claims of a
// store lower quotas; PostgreSQL's one-statement claims leave such a claim
// to them): a limit that lowers a claim's quota below what
// it asked for throttles the claim only when the claim filled that quota:
// a tenant with fewer jobs than the limit's room left lost nothing to it
// (a tenant key's poll of an empty queue under a partly used rate was
// reported throttled on every poll, and counted).
func testThrottlePartlySpent(t *testing.T, s store.Store) {
	l := store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Rate: 4, Period: time.Hour}
	putLimit(t, s, l)
	job := func() *store.JobInsertParams {
		p := newJob("k")
		p.Tenant, p.Queue = "a", "q"
		return p
	}
	poll := func(now time.Time, tenant string) ([]*idemtype.JobRow, store.ClaimReport) {
		t.Helper()
		var rep store.ClaimReport
		jobs := claimWith(t, s, &store.JobClaimParams{Tenant: tenant, Queues: []string{"q"},
			WorkerID: "w1", Limit: 10, LeaseUntil: now.Add(lease), Now: now, Report: &rep})
		return jobs, rep
	}
	throttled := func(now time.Time) int64 {
		t.Helper()
		ls, err := s.LimitList(t.Context(), &store.LimitListParams{Now: now})
		if err != nil || len(ls) != 1 {
			t.Fatalf("LimitList = %s, %v; want a's limit", fmtThrottled(ls), err)
		}
		return ls[0].Throttled
	}
	insertNew(t, s, at(0), job())
	// The rate (4) cuts the claim of 10 to 4, but a has only one job.
	for i, tenant := range []string{"", "a"} {
		now := at(time.Duration(1+2*i) * time.Second)
		if jobs, rep := poll(now, tenant); len(jobs) != 1-i || rep.Throttled {
			t.Fatalf("claim %q with %d of a's jobs waiting under a rate with room took %d, report %+v; want all, not throttled",
				tenant, 1-i, len(jobs), rep)
		}
		if n := throttled(now); n != 0 {
			t.Fatalf("a rate with room for every waiting job counted %d throttled claims, want 0", n)
		}
	}
	// Five wait, 3 are left of the rate: the claim takes 3, throttled.
	insertNew(t, s, at(0), job(), job(), job(), job(), job())
	now := at(5 * time.Second)
	jobs, rep := poll(now, "a")
	if want := l.WindowAt(now).Add(time.Hour); len(jobs) != 3 || !rep.Throttled || !rep.NextRefill.Equal(want) {
		t.Fatalf("claim of 10 with 5 of a's jobs waiting, 3 left of its rate, took %d, report %+v; want 3, throttled, refill %v", len(jobs), rep, want)
	}
	if n := throttled(now); n != 1 {
		t.Fatalf("the rate that held 2 jobs back counted %d throttled claims, want 1", n)
	}
}

// throttledOf is the throttled count LimitList reports at now for the
// limit of scope; the test fails when there is none.
func throttledOf(t *testing.T, s store.Store, scope store.FlowScope, now time.Time) int64 {
	t.Helper()
	ls, err := s.LimitList(t.Context(), &store.LimitListParams{Now: now})
	if err != nil {
		t.Fatalf("LimitList: %v", err)
	}
	for _, x := range ls {
		if x.FlowScope == scope {
			return x.Throttled
		}
	}
	t.Fatalf("LimitList = %s: no limit of %+v", fmtThrottled(ls), scope)
	return 0
}
