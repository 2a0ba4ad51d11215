package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// claimDueAnnounceCases: a claim that makes its queue's due jobs available
// (every claim promotes them first) and takes fewer than it promoted
// announces the queue (store.Listener or store.Announcer), as the promoter
// does: the jobs it left are available, and the other claimers of the
// queue, idle since their own claims found nothing due, would otherwise
// wait for their next poll. A claim that takes all it promoted announces
// nothing. Each on a claim of one queue, of two queues, and of a queue
// under a concurrency limit and under a rate (PostgreSQL's claim paths);
// limited only: the last two. A claim that took an older available job of
// the queue instead of one it promoted announces it too: what counts is
// whether promoted jobs were left, not how many jobs it took.
func claimDueAnnounceCases(limitedOnly bool) []testCase {
	var out []testCase
	for _, shape := range []struct {
		name    string
		setup   func(t *testing.T, s store.Store)
		other   []string // the claim's other queues
		limited bool
	}{
		{"one_queue", func(*testing.T, store.Store) {}, nil, false},
		{"two_queues", func(*testing.T, store.Store) {}, []string{"r"}, false},
		{"concurrency_limit", func(t *testing.T, s store.Store) {
			putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 10})
		}, nil, true},
		{"rate_limit", func(t *testing.T, s store.Store) {
			putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 100, Period: time.Minute})
		}, nil, true},
	} {
		if limitedOnly && !shape.limited {
			continue
		}
		out = append(out,
			testCase{"Listener/claim_leaving_promoted_jobs_announces_queue_" + shape.name, func(t *testing.T, s store.Store) {
				shape.setup(t, s)
				testClaimLeavingPromotedAnnounces(t, s, shape.other)
			}},
			testCase{"Listener/claim_taking_all_it_promotes_announces_nothing_" + shape.name, func(t *testing.T, s store.Store) {
				shape.setup(t, s)
				testClaimTakingPromotedQuiet(t, s, shape.other)
			}},
			testCase{"Listener/claim_taking_older_job_over_promoted_announces_queue_" + shape.name, func(t *testing.T, s store.Store) {
				shape.setup(t, s)
				testClaimOlderOverPromotedAnnounces(t, s, shape.other)
			}})
	}
	if !limitedOnly {
		out = append(out, testCase{"Listener/claim_leaving_promoted_jobs_of_one_queue_taking_another_announces", testClaimLeftoverBehindOtherQueue})
	}
	return out
}

// testClaimLeftoverBehindOtherQueue: a claim of queues r and q, limit 1,
// promotes q's due job and takes r's available one: q's job is left
// available and q is announced (the claim took no job of q).
func testClaimLeftoverBehindOtherQueue(t *testing.T, s store.Store) {
	r := newJob("k")
	r.Queue, r.RunAt = "r", at(0)
	insertNew(t, s, at(0), append([]*store.JobInsertParams{r}, scheduledIn("q", 1, at(time.Minute))...)...)
	ch := announcements(t, s)
	got := claim(t, s, at(2*time.Minute), 1, "r", "q")
	if len(got) != 1 || got[0].Queue != "r" {
		t.Fatalf("claim of 1 over queues r, q took %v, want r's job", got)
	}
	wantAnnounced(t, ch, "q", "a claim of r and q promoted q's due job and took r's")
	if got := claim(t, s, at(2*time.Minute), 10, "q"); len(got) != 1 {
		t.Fatalf("the claim after took %d jobs of q, want the 1 left", len(got))
	}
}

// testClaimOlderOverPromotedAnnounces: queue q has an available job and
// a scheduled one that becomes due later; a claim of 1 promotes the due
// job and takes the older available one (earlier run_at): it promoted as
// many jobs of q as it took, yet left the promoted one available, and q is
// announced.
func testClaimOlderOverPromotedAnnounces(t *testing.T, s store.Store, other []string) {
	older := newJob("k")
	older.Queue, older.RunAt = "q", at(0)
	insertNew(t, s, at(0), append([]*store.JobInsertParams{older}, scheduledIn("q", 1, at(time.Minute))...)...)
	ch := announcements(t, s)
	queues := append([]string{"q"}, other...)
	got := claim(t, s, at(2*time.Minute), 1, queues...)
	if len(got) != 1 || !got[0].RunAt.Equal(at(0)) {
		t.Fatalf("claim of 1 took %v, want q's older available job", got)
	}
	wantAnnounced(t, ch, "q", "a claim of 1 promoted q's due job and took an older available one")
	if got := claim(t, s, at(2*time.Minute), 10, queues...); len(got) != 1 {
		t.Fatalf("the claim after took %d jobs, want the promoted one left", len(got))
	}
}

// RunClaimDueAnnounce runs the cases of claimDueAnnounceCases under flow
// control (a concurrency limit, a rate) on stores from newStore: a store
// with several limited claim paths runs them on each.
func RunClaimDueAnnounce(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	runCases(t, claimDueAnnounceCases(true), newStore)
}

// scheduledIn returns insert params of n jobs of queue due at runAt.
func scheduledIn(queue string, n int, runAt time.Time) []*store.JobInsertParams {
	out := make([]*store.JobInsertParams, n)
	for i := range out {
		p := newJob("k")
		p.Queue, p.RunAt = queue, runAt
		out[i] = p
	}
	return out
}

// testClaimLeavingPromotedAnnounces: three jobs of queue q become due; a
// claim of one promotes them all and announces q; the two it left are
// claimable.
func testClaimLeavingPromotedAnnounces(t *testing.T, s store.Store, other []string) {
	insertNew(t, s, at(0), scheduledIn("q", 3, at(time.Minute))...)
	ch := announcements(t, s)
	queues := append([]string{"q"}, other...)
	if got := claim(t, s, at(2*time.Minute), 1, queues...); len(got) != 1 {
		t.Fatalf("claim of 1 over 3 due jobs took %d", len(got))
	}
	wantAnnounced(t, ch, "q", "a claim of 1 promoted 3 due jobs")
	if got := claim(t, s, at(2*time.Minute), 10, queues...); len(got) != 2 {
		t.Fatalf("the claim after took %d jobs, want the 2 left", len(got))
	}
}

// testClaimTakingPromotedQuiet: two jobs of queue q become due and a claim
// of five takes both: nothing is announced for q. Then a claim of queue z
// leaves a promoted job (announced, as above): q must not come before it
// (a store announces in commit order).
func testClaimTakingPromotedQuiet(t *testing.T, s store.Store, other []string) {
	insertNew(t, s, at(0), append(scheduledIn("q", 2, at(time.Minute)), scheduledIn("z", 2, at(time.Minute))...)...)
	ch := announcements(t, s)
	if got := claim(t, s, at(2*time.Minute), 5, append([]string{"q"}, other...)...); len(got) != 2 {
		t.Fatalf("claim of 5 over 2 due jobs took %d", len(got))
	}
	if got := claim(t, s, at(2*time.Minute), 1, "z"); len(got) != 1 {
		t.Fatalf("claim of 1 over 2 due jobs of z took %d", len(got))
	}
	deadline := time.After(10 * time.Second) // a store that never announces fails instead of hanging
	for {
		select {
		case v := <-ch:
			switch v {
			case "q":
				t.Fatal("a claim that took every job it promoted announced its queue")
			case "z":
				return
			}
		case <-deadline:
			t.Fatal("queue z not announced within 10s (a claim of 1 promoted 2 due jobs)")
		}
	}
}
