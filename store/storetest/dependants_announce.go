package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// dependantsAnnounceCases: a write that releases a pending dependant
// announces the dependant's queue (NOTIFY, or store.Announcer on a store
// without it), so that its workers start it at once rather than at their
// next poll: the writer's caller cannot see which dependants it released.
func dependantsAnnounceCases() []testCase {
	return []testCase{
		{"Listener/completion_announces_released_dependants_queue", testCompletionAnnouncesDependants},
		{"Listener/death_announces_released_any_outcome_dependants_queue", testDeathAnnouncesDependants},
		{"Listener/cancel_announces_released_any_outcome_dependants_queue", testCancelAnnouncesDependants},
		{"Listener/rescue_to_dead_announces_released_any_outcome_dependants_queue", testRescueDeadAnnouncesDependants},
	}
}

// testCompletionAnnouncesDependants: the completion of a job releases its
// dependant of queue d and announces d.
func testCompletionAnnouncesDependants(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	p := dependsOn("after-a", a)
	p.Queue = "d"
	dep := insert1(t, s, at(0), p)
	c := claimJob(t, s, a, at(0))
	ch := announcements(t, s)
	finishAll(t, s, completion(c, `1`, at(time.Second)))
	wantState(t, s, dep.ID, idemtype.StateAvailable)
	wantAnnounced(t, ch, "d", "a completion released a dependant of queue d")
}

// testDeathAnnouncesDependants: a job that dies releases its dependant
// of queue d that waits for any outcome, and announces d.
func testDeathAnnouncesDependants(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	dep := insert1(t, s, at(0), anyOutcome("after-a", a))
	c := claimJob(t, s, a, at(0))
	ch := announcements(t, s)
	finishAll(t, s, failure(c, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(time.Second)))
	wantState(t, s, dep.ID, idemtype.StateAvailable)
	wantAnnounced(t, ch, "d", "a death released a dependant of queue d")
}

// testCancelAnnouncesDependants: the cancel of a job that is not running
// releases its dependant of queue d that waits for any outcome, and
// announces d.
func testCancelAnnouncesDependants(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	dep := insert1(t, s, at(0), anyOutcome("after-a", a))
	ch := announcements(t, s)
	cancelJob(t, s, a, at(time.Second))
	wantState(t, s, dep.ID, idemtype.StateAvailable)
	wantAnnounced(t, ch, "d", "a cancel released a dependant of queue d")
}

// testRescueDeadAnnouncesDependants: a job at its last attempt whose lease
// expired is rescued to dead, which releases its dependant of queue d
// that waits for any outcome and announces d.
func testRescueDeadAnnouncesDependants(t *testing.T, s store.Store) {
	p := newJob("a")
	p.MaxAttempts = 1
	a := insert1(t, s, at(0), p)
	dep := insert1(t, s, at(0), anyOutcome("after-a", a))
	claimLease(t, s, a, at(0), at(30*time.Second))
	ch := announcements(t, s)
	if got := rescue(t, s, at(time.Minute), 100); len(got) != 1 || got[0] != a.ID {
		t.Fatalf("rescue: %v, want [%d]", got, a.ID)
	}
	wantState(t, s, a.ID, idemtype.StateDead)
	wantState(t, s, dep.ID, idemtype.StateAvailable)
	wantAnnounced(t, ch, "d", "a rescue to dead released a dependant of queue d")
}
