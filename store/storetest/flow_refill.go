package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// A claim held back only by concurrency reports no refill time, even when
// the limit at its concurrency also has a rate with room left: its window's
// end is not when work can start again (a pull worker told to retry after
// it waited up to a whole period for a slot that a finish frees). A rate
// that is spent still reports its window's end.
func testLimitConcurrencyReportsNoRefill(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Rate: 100, Period: time.Hour, Concurrency: 1})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: 100, Period: time.Hour, Concurrency: 2})
	insertTenant(t, s, "a", 3)
	insertTenant(t, s, "b", 3)
	claimReport := func(now time.Time) (map[string]int, store.ClaimReport) {
		t.Helper()
		var rep store.ClaimReport
		jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 1,
			LeaseUntil: now.Add(time.Hour), Now: now, Report: &rep})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		return byTenant(jobs), rep
	}
	if got, _ := claimReport(at(time.Second)); got["a"] != 1 {
		t.Fatalf("first claim took %v, want a:1", got)
	}
	// a is at its concurrency (its rate has 99 left): b runs, a throttles.
	got, rep := claimReport(at(2 * time.Second))
	if got["b"] != 1 || !rep.Throttled || !rep.NextRefill.IsZero() {
		t.Fatalf("claim with a at its concurrency took %v, report %+v; want b:1, throttled, no refill", got, rep)
	}
	// The queue is at its concurrency (its rate has 98 left).
	got, rep = claimReport(at(3 * time.Second))
	if len(got) != 0 || !rep.Throttled || !rep.NextRefill.IsZero() {
		t.Fatalf("claim with the queue at its concurrency took %v, report %+v; want nothing, throttled, no refill", got, rep)
	}
	// A spent rate beside a concurrency with room reports its window's end.
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: 2, Period: time.Hour, Concurrency: 10})
	for i := range 2 { // the changed rate starts its window again: 2 more start
		if got, _ := claimReport(at(time.Duration(4+i) * time.Second)); got["b"] != 1 {
			t.Fatalf("claim %d under the queue's new rate took %v, want b:1", i, got)
		}
	}
	got, rep = claimReport(at(6 * time.Second))
	want := (&store.Limit{Rate: 2, Period: time.Hour}).WindowAt(at(6 * time.Second)).Add(time.Hour)
	if len(got) != 0 || !rep.Throttled || !rep.NextRefill.Equal(want) {
		t.Fatalf("claim with the queue's rate spent took %v, report %+v; want nothing, throttled, refill at %v", got, rep, want)
	}
}
