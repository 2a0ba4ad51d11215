package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testClaimLimitZero: a claim with Limit 0 claims nothing and changes
// nothing — on one queue, on several, and where a rate limit applies (each
// takes another path in a store) — and does not use up a rate budget: the
// next claim still gets all the rate allows.
func testClaimLimitZero(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), newJob("k"), newJob("k"), newJob("k"))
	other := newJob("k")
	other.Queue = "other"
	js = append(js, insertNew(t, s, at(0), other)...)
	zero := func(what string, queues ...string) {
		t.Helper()
		var rep store.ClaimReport
		got := claimWith(t, s, &store.JobClaimParams{Queues: queues, WorkerID: "w1", Limit: 0,
			LeaseUntil: at(lease), Now: at(0), Report: &rep})
		if len(got) != 0 {
			t.Fatalf("%s: a claim of 0 returned %v", what, ids(got))
		}
		for _, j := range js {
			if g := mustGet(t, s, j.ID); g.State != idemtype.StateAvailable || g.Attempt != 0 {
				t.Fatalf("%s: job %d is %s, attempt %d, after a claim of 0", what, j.ID, g.State, g.Attempt)
			}
		}
	}
	zero("one queue", "default")
	zero("two queues", "default", "other")
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: 2, Period: time.Hour})
	zero("rate-limited queue", "default")
	zero("rate-limited queue and another", "default", "other")
	if got := claim(t, s, at(time.Second), 10, "default"); len(got) != 2 {
		t.Fatalf("after claims of 0, a claim under a rate of 2 got %d jobs, want 2", len(got))
	}
}
