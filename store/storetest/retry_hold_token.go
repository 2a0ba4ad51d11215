package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// retryHoldTokenCases: a job of a FIFO partition cancelled while it runs
// holds its partition under its lease (JobCancel); retried while it holds,
// it waits for that lease's end (JobRetryMany), and a cancel before it
// runs again keeps the hold. The old handler may still run until then:
// when it returns, its refused finish (the old lease's token) ends that
// hold at once, as it ends the hold of a job cancelled once. The old
// lease never acts on the job's later runs: a new claim's token is
// another, and the old one's heartbeats and finishes are refused without
// changing the new run, its lease or its hold.
func retryHoldTokenCases() []testCase {
	return []testCase{
		{"FIFO/retried_hold_cancelled_again_ends_at_old_completion", testRetriedHoldCancelAgainCompletion},
		{"FIFO/retried_hold_cancelled_again_ends_at_old_failures", testRetriedHoldCancelAgainFailures},
		{"FIFO/old_lease_never_acts_on_retried_job", testRetriedHoldOldLeaseInert},
	}
}

// wantLeaseLost checks that every item of errs is ErrLeaseLost.
func wantLeaseLost(t *testing.T, what string, errs []error) {
	t.Helper()
	for i, err := range errs {
		if !errors.Is(err, idemtype.ErrLeaseLost) {
			t.Errorf("%s (item %d): %v, want ErrLeaseLost", what, i, err)
		}
	}
}

// testRetriedHoldCancelAgainCompletion: head a1 runs, is cancelled (it
// holds partition A), is retried (it waits for the old lease's end, still
// holding) and cancelled again before it ran. Its old handler's heartbeat
// is refused and neither changes the retried job nor ends the hold, nor
// does a finish under another token; the old handler's completion is
// refused, writes nothing, ends the hold and announces the queue: a2 runs
// long before the old lease's end.
func testRetriedHoldCancelAgainCompletion(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	end := at(time.Hour)
	old := claimLease(t, s, js[0], at(0), end)
	cancelJob(t, s, old, at(time.Second))
	retryIDs(t, s, at(2*time.Second), js[0].ID)
	r := wantState(t, s, js[0].ID, idemtype.StateScheduled)
	wantTime(t, "retried holding job's run_at", r.RunAt, end)

	// The old handler still runs: its heartbeat is refused and changes
	// nothing on the retried job.
	wantLeaseLost(t, "old heartbeat of the retried job",
		heartbeat(t, s, at(2*time.Hour), at(3*time.Second), leaseOf(old)))
	r = wantState(t, s, js[0].ID, idemtype.StateScheduled)
	wantTime(t, "retried job's run_at after the old heartbeat", r.RunAt, end)
	if r.Attempt != 0 {
		t.Errorf("retried job after the old heartbeat: attempt %d, want 0", r.Attempt)
	}

	cancelJob(t, s, js[0], at(4*time.Second))
	if got := claim(t, s, at(5*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the first run's cancelled handler may still run", ids(got))
	}
	// A heartbeat is not an acknowledgement: the handler still runs.
	wantLeaseLost(t, "old heartbeat of the job cancelled again",
		heartbeat(t, s, at(2*time.Hour), at(6*time.Second), leaseOf(old)))
	if got := claim(t, s, at(6*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v after a refused heartbeat of the old lease", ids(got))
	}
	// Another lease's finish does not acknowledge it.
	other := *old
	other.LeaseToken = "not-the-lease"
	wantLeaseLost(t, "finish under another token", finishAll(t, s, completion(&other, `1`, at(6*time.Second))))
	if got := claim(t, s, at(6*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v after a finish under another lease", ids(got))
	}

	// The old handler returned: its finish is refused and ends the hold.
	ch := announcements(t, s)
	wantLeaseLost(t, "old completion of the job cancelled again",
		finishAll(t, s, completion(old, `1`, at(7*time.Second))))
	r = wantState(t, s, js[0].ID, idemtype.StateCancelled)
	wantNoLease(t, r)
	if len(r.Result) != 0 && string(r.Result) != "null" {
		t.Errorf("the refused completion stored a result: %s", r.Result)
	}
	if as := attempts(t, s, js[0].ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeCancelled {
		t.Errorf("attempts after the refused completion: %s, want the one cancelled", fmtAttempts(as))
	}
	got := claim(t, s, at(8*time.Second), 10, "q")
	if len(got) == 0 {
		t.Fatalf("claimed nothing after the old handler's refused finish: the hold of the job cancelled again lasts to its old lease's end (%v)", end)
	}
	wantIDs(t, "after the old handler's refused finish", ids(got), []int64{js[1].ID})
	wantAnnounced(t, ch, "q", "the old handler's refused finish ended the hold")
}

// testRetriedHoldCancelAgainFailures: as
// testRetriedHoldCancelAgainCompletion, with the old handlers' failures
// (retryable, dead, snooze) in one call: each is refused, changes nothing
// on its job (state, attempt, run_at, error) and ends its hold.
func testRetriedHoldCancelAgainFailures(t *testing.T, s store.Store) {
	parts := []string{"R", "D", "S"}
	var heads, next []*idemtype.JobRow
	for _, p := range parts {
		js := insertNew(t, s, at(0), partitioned("h"+p, "q", p), partitioned("n"+p, "q", p))
		heads, next = append(heads, js[0]), append(next, js[1])
	}
	end := at(time.Hour)
	olds := make([]*idemtype.JobRow, len(heads))
	for i, h := range heads {
		olds[i] = claimLease(t, s, h, at(0), end)
		cancelJob(t, s, olds[i], at(time.Second))
	}
	retryIDs(t, s, at(2*time.Second), ids(heads)...)
	for _, h := range heads {
		cancelJob(t, s, h, at(3*time.Second))
	}
	if got := claim(t, s, at(4*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the first runs' cancelled handlers may still run", ids(got))
	}
	snooze := failure(olds[2], idemtype.StateScheduled, idemtype.OutcomeSnoozed, "", at(2*time.Hour), at(5*time.Second))
	snooze.Snooze = true
	wantLeaseLost(t, "old failures of the jobs cancelled again", finishAll(t, s,
		failure(olds[0], idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(2*time.Hour), at(5*time.Second)),
		failure(olds[1], idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(5*time.Second)),
		snooze))
	for _, h := range heads {
		r := wantState(t, s, h.ID, idemtype.StateCancelled)
		wantNoLease(t, r)
		wantTime(t, "run_at of "+h.Kind, r.RunAt, end)
		if r.Attempt != 0 || r.LastError != "user cancelled" {
			t.Errorf("%s after its old handler's refused failure: attempt %d, last error %q; want 0, %q",
				h.Kind, r.Attempt, r.LastError, "user cancelled")
		}
		if as := attempts(t, s, h.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeCancelled {
			t.Errorf("attempts of %s after the refused failure: %s, want the one cancelled", h.Kind, fmtAttempts(as))
		}
	}
	wantIDSet(t, "after the old handlers' refused failures", ids(claim(t, s, at(6*time.Second), 10, "q")), ids(next))
}

// testRetriedHoldOldLeaseInert: the old lease's token never acts on the
// retried job's later runs. Head a1 of partition A and n1 of no partition
// run under one lease end and are cancelled (each holds its lease, a1 its
// partition too), retried (both wait for the old lease's end) and
// cancelled again. The old handlers return: their refused finishes end
// both holds. Retried again, both run at once under
// new tokens; the old leases' heartbeats and finishes (completion,
// failure) are refused and change neither run nor its lease; n1's
// completion under its new token is not taken for a repeat of the old
// one's. a1's new run is cancelled and holds under its new lease: the old
// lease's finish does not end that hold, the new one's does.
func testRetriedHoldOldLeaseInert(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"), partitioned("n1", "q", ""))
	a1, a2, n1 := js[0], js[1], js[2]
	end := at(time.Hour)
	oldA := claimLease(t, s, a1, at(0), end)
	oldN := claimLease(t, s, n1, at(0), end)
	cancelJob(t, s, oldA, at(time.Second))
	cancelJob(t, s, oldN, at(time.Second))
	retryIDs(t, s, at(2*time.Second), a1.ID, n1.ID)
	wantTime(t, "run_at of the retried holding job", wantState(t, s, a1.ID, idemtype.StateScheduled).RunAt, end)
	wantTime(t, "run_at of the retried job of no partition", wantState(t, s, n1.ID, idemtype.StateScheduled).RunAt, end)
	cancelJob(t, s, a1, at(3*time.Second))
	cancelJob(t, s, n1, at(3*time.Second))

	// The old handlers return: refused, they end both holds.
	wantLeaseLost(t, "old finishes of the jobs cancelled again", finishAll(t, s,
		completion(oldA, `1`, at(4*time.Second)), completion(oldN, `1`, at(4*time.Second))))
	wantNoLease(t, wantState(t, s, a1.ID, idemtype.StateCancelled))
	wantNoLease(t, wantState(t, s, n1.ID, idemtype.StateCancelled))

	// Retried again: no hold is left, both run at once.
	retryIDs(t, s, at(5*time.Second), a1.ID, n1.ID)
	wantTime(t, "run_at of a1 retried after its hold ended", wantState(t, s, a1.ID, idemtype.StateAvailable).RunAt, at(5*time.Second))
	got := claim(t, s, at(6*time.Second), 10, "q")
	wantIDSet(t, "claim of the jobs retried again", ids(got), []int64{a1.ID, n1.ID})
	if len(got) != 2 {
		t.FailNow()
	}
	newA, newN := got[0], got[1]
	if newA.ID != a1.ID {
		newA, newN = newN, newA
	}
	if newA.LeaseToken == oldA.LeaseToken || newN.LeaseToken == oldN.LeaseToken {
		t.Fatalf("a new run reuses its old lease's token")
	}
	newEnd := at(6*time.Second + lease)

	// The old leases act on nothing while the new runs run.
	wantLeaseLost(t, "old heartbeats during the new runs",
		heartbeat(t, s, at(2*time.Hour), at(7*time.Second), leaseOf(oldA), leaseOf(oldN)))
	wantLeaseLost(t, "old finishes during the new runs", finishAll(t, s,
		completion(oldA, `1`, at(8*time.Second)),
		failure(oldN, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(8*time.Second))))
	for _, n := range []*idemtype.JobRow{newA, newN} {
		r := wantState(t, s, n.ID, idemtype.StateRunning)
		if r.LeaseToken != n.LeaseToken || r.Attempt != 1 {
			t.Errorf("job %d after the old lease's heartbeat and finish: token %q, attempt %d; want %q, 1",
				n.ID, r.LeaseToken, r.Attempt, n.LeaseToken)
		}
		wantTimeP(t, "lease end of the new run", r.LeaseExpiresAt, newEnd)
		if len(r.Result) != 0 && string(r.Result) != "null" {
			t.Errorf("job %d: the old lease's refused completion stored a result: %s", n.ID, r.Result)
		}
	}
	for _, n := range []*idemtype.JobRow{newA, newN} {
		var ended []*idemtype.Attempt
		for _, a := range attempts(t, s, n.ID) {
			if a.Outcome != idemtype.OutcomeRunning {
				ended = append(ended, a)
			}
		}
		if len(ended) != 1 || ended[0].Outcome != idemtype.OutcomeCancelled {
			t.Errorf("ended attempts of job %d during its new run: %s, want the first run's (cancelled) only",
				n.ID, fmtAttempts(ended))
		}
	}

	// n1's new run completes; the old lease's identical completion is no
	// repeat of it, the new lease's is.
	finish1(t, s, completion(newN, `1`, at(9*time.Second)))
	wantLeaseLost(t, "old completion after the new run's", finishAll(t, s, completion(oldN, `1`, at(10*time.Second))))
	if errs := finishAll(t, s, completion(newN, `1`, at(10*time.Second))); errs[0] != nil {
		t.Errorf("repeat of the new run's completion: %v", errs[0])
	}
	wantState(t, s, n1.ID, idemtype.StateCompleted)

	// a1's new run is cancelled: it holds under its new lease, which the
	// old lease's finish does not end.
	cancelJob(t, s, newA, at(11*time.Second))
	wantLeaseLost(t, "old finish of the new run's hold", finishAll(t, s, completion(oldA, `1`, at(12*time.Second))))
	if got := claim(t, s, at(13*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v: the old lease's finish ended the hold of a1's new run", ids(got))
	}
	wantLeaseLost(t, "new finish of the new run's hold", finishAll(t, s, completion(newA, `1`, at(14*time.Second))))
	wantIDs(t, "after the new run's refused finish", ids(claim(t, s, at(15*time.Second), 10, "q")), []int64{a2.ID})
}
