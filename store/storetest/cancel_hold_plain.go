package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// cancelHoldPlainCases: a job of no FIFO partition cancelled while it runs
// holds its lease as one of a partition does (the hold: JobCancel), since
// its handler may still run: it keeps its slot under the concurrency
// limits of its scope, a retry runs it again no earlier than that lease's
// end, and retention keeps its row, until its process acknowledges the
// cancel (the refused finish of its lease) or the lease ends (the rescuer).
// (Limits/cancel_hold_counts_against_* check the acknowledgement under
// every scope of limit.)
func cancelHoldPlainCases() []testCase {
	return []testCase{
		{"Cancel/running_job_of_no_partition_holds_its_slot_until_lease_ends", testCancelHoldPlainLeaseEnd},
		{"Cancel/retry_of_cancelled_running_job_waits_for_its_lease", testCancelHoldPlainRetry},
		{"Cancel/retention_keeps_cancelled_running_job_until_acknowledged", testCancelHoldPlainRetention},
		{"Cancel/dependants_waiting_for_any_outcome_wait_for_the_hold", testCancelHoldDependants},
		{"Cancel/acknowledgement_releases_dependants_at_its_own_time", testCancelHoldAckTime},
		{"Cancel/rescue_ends_holds_up_to_its_limit", testCancelHoldRescueLimit},
	}
}

// testCancelHoldPlainLeaseEnd: under a queue concurrency of 1, a running
// job of no partition is cancelled; no other job of the queue starts until
// its lease ends and the rescuer ends the hold (the job stays cancelled).
func testCancelHoldPlainLeaseEnd(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 1})
	js := insertNew(t, s, at(0), partitioned("p1", "q", ""), partitioned("p2", "q", ""))
	c := claimLease(t, s, js[0], at(0), at(30*time.Second))
	cancelJob(t, s, c, at(time.Second))
	if got := claim(t, s, at(2*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v under a concurrency of 1 while the cancelled job's handler may still run", ids(got))
	}
	rescue(t, s, at(29*time.Second), 100)
	if got := claim(t, s, at(29*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v before the cancelled job's lease ended", ids(got))
	}
	if got := rescue(t, s, at(31*time.Second), 100); len(got) != 0 {
		t.Errorf("rescue reported %v: a cancelled job is not rescued", got)
	}
	wantNoLease(t, wantState(t, s, js[0].ID, idemtype.StateCancelled))
	wantIDs(t, "after the lease ended", ids(claim(t, s, at(32*time.Second), 10, "q")), []int64{js[1].ID})
}

// testCancelHoldPlainRetry: a running job of no partition cancelled and
// retried while its handler may still run is not claimed before its old
// lease ends, and the old attempt's finish does not touch the new one.
func testCancelHoldPlainRetry(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), partitioned("p1", "q", ""))
	c := claimLease(t, s, j, at(0), at(30*time.Second))
	cancelJob(t, s, c, at(time.Second))
	rs, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{j.ID}, Now: at(2 * time.Second)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("retry: %v %v", rs, err)
	}
	if !rs[0].RunAt.Equal(at(30 * time.Second)) {
		t.Errorf("retried job runs at %v, want the old lease's end %v", rs[0].RunAt, at(30*time.Second))
	}
	if got := claim(t, s, at(10*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the cancelled attempt's lease lives", ids(got))
	}
	wantIDs(t, "retried job once the old lease ended", ids(claim(t, s, at(30*time.Second), 10, "q")), []int64{j.ID})
	if errs := finishAll(t, s, completion(c, `1`, at(31*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the old lease: %v, want ErrLeaseLost", errs[0])
	}
	wantState(t, s, j.ID, idemtype.StateRunning)
}

// testCancelHoldPlainRetention: retention does not delete a cancelled job
// of no partition whose handler may still run (deleting the row would end
// its hold); once its refused finish acknowledged the cancel, it does.
func testCancelHoldPlainRetention(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), partitioned("p1", "q", ""))
	c := claimLease(t, s, j, at(0), at(time.Hour))
	cancelJob(t, s, c, at(time.Second))
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CancelledBefore: at(time.Minute),
		Limit: 100, Now: at(time.Minute)}); n != 0 {
		t.Errorf("retention deleted %d jobs, one of them cancelled while its handler may still run", n)
	}
	if errs := finishAll(t, s, completion(c, `1`, at(2*time.Minute))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled job: %v, want ErrLeaseLost", errs[0])
	}
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CancelledBefore: at(time.Minute),
		Limit: 100, Now: at(3 * time.Minute)}); n != 1 {
		t.Errorf("retention after the acknowledgement deleted %d jobs, want 1", n)
	}
	gone(t, s, j.ID)
}

// anyOutcome returns params of a job in queue "d" that waits for deps to
// finish, whatever the outcome (DependsOnFinished).
func anyOutcome(kind string, deps ...*idemtype.JobRow) *store.JobInsertParams {
	p := dependsOn(kind, deps...)
	p.Queue, p.DependsOnFinished = "d", true
	return p
}

// testCancelHoldDependants: a job that waits for any outcome of a job
// cancelled while it runs (a batch's on_finish job, a clean-up) waits until
// the cancelled handler is known to have returned: it stays pending while
// the hold lasts (when it is already waiting, when it is inserted then, and
// when it is retried then), and is released by the refused finish that
// ends the hold, or by the rescuer at the lease's end. A dependant that
// needs its dependency to complete is cancelled at the cancel's commit, as
// before: it will never run.
func testCancelHoldDependants(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a", "q", ""), partitioned("b", "q", ""))
	a, b := js[0], js[1]
	deps := insertNew(t, s, at(0), anyOutcome("after-a", a), dependsOn("needs-a", a), anyOutcome("after-b", b),
		anyOutcome("retried-after-a", a))
	afterA, needsA, afterB, retried := deps[0], deps[1], deps[2], deps[3]
	cancelJob(t, s, retried, at(0)) // cancelled before a runs; retried below while a holds
	ca := claimLease(t, s, a, at(0), at(30*time.Second))
	cb := claimLease(t, s, b, at(0), at(30*time.Second))
	cancelJob(t, s, ca, at(time.Second))
	cancelJob(t, s, cb, at(time.Second))

	wantState(t, s, needsA.ID, idemtype.StateCancelled)
	wantState(t, s, afterA.ID, idemtype.StatePending)
	wantState(t, s, afterB.ID, idemtype.StatePending)
	late := insert1(t, s, at(2*time.Second), anyOutcome("late-after-a", a))
	if late.State != idemtype.StatePending {
		t.Errorf("a job waiting for any outcome of a cancelled job whose handler may still run was inserted %s, want pending", late.State)
	}
	rs, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{retried.ID}, Now: at(2 * time.Second)})
	if err != nil || len(rs) != 1 || rs[0].State != idemtype.StatePending {
		t.Errorf("retry of a job waiting for any outcome of a holding job: %v %v, want it pending", rs, err)
	}
	if got := claim(t, s, at(3*time.Second), 10, "d"); len(got) != 0 {
		t.Fatalf("claimed %v while the cancelled handlers they wait for may still run", ids(got))
	}

	// a's handler returns: its refused finish ends the hold and releases
	// what waits for a.
	if errs := finishAll(t, s, completion(ca, `1`, at(4*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled job: %v, want ErrLeaseLost", errs[0])
	}
	wantIDSet(t, "after a's handler returned", ids(claim(t, s, at(5*time.Second), 10, "d")),
		[]int64{afterA.ID, late.ID, retried.ID})
	wantState(t, s, afterB.ID, idemtype.StatePending)

	// b's handler never returns: the rescuer ends its hold at the lease's
	// end and releases what waits for b.
	rescue(t, s, at(29*time.Second), 100)
	wantState(t, s, afterB.ID, idemtype.StatePending)
	rescue(t, s, at(31*time.Second), 100)
	wantIDs(t, "after b's lease ended", ids(claim(t, s, at(32*time.Second), 10, "d")), []int64{afterB.ID})
}

// testCancelHoldAckTime: the dependants a refused finish releases (it ends
// a cancel's hold) are released as of that finish, whatever else the call
// finishes: d (due at 10 s) waits for any outcome of a, cancelled at 1 s;
// one call completes x at 1 s and carries a's refused finish at 20 s: d is
// available, not scheduled.
func testCancelHoldAckTime(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a", "q", ""), partitioned("x", "q", ""))
	a, x := js[0], js[1]
	dp := anyOutcome("d", a)
	dp.RunAt = at(10 * time.Second)
	d := insert1(t, s, at(0), dp)
	ca := claimLease(t, s, a, at(0), at(time.Minute))
	cx := claimLease(t, s, x, at(0), at(time.Minute))
	cancelJob(t, s, ca, at(time.Second))
	errs := finishAll(t, s, completion(cx, `1`, at(time.Second)), completion(ca, `1`, at(20*time.Second)))
	if errs[0] != nil || !errors.Is(errs[1], idemtype.ErrLeaseLost) {
		t.Fatalf("finishes: %v, want nil and ErrLeaseLost", errs)
	}
	wantState(t, s, d.ID, idemtype.StateAvailable)
}

// testCancelHoldRescueLimit: the rescuer ends at most its limit of holds
// whose leases ended per call (the rest at the next calls), each releasing
// its dependant that waits for any outcome.
func testCancelHoldRescueLimit(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a", "q", ""), partitioned("b", "q", ""), partitioned("c", "q", ""))
	for _, j := range js {
		insert1(t, s, at(0), anyOutcome("after-"+j.Kind, j))
		cancelJob(t, s, claimLease(t, s, j, at(0), at(30*time.Second)), at(time.Second))
	}
	for round := 1; round <= 3; round++ {
		rescue(t, s, at(time.Minute), 1)
		if got := claim(t, s, at(time.Minute), 10, "d"); len(got) != 1 {
			t.Fatalf("rescue %d with a limit of 1 released %d dependants (%v), want 1", round, len(got), ids(got))
		}
	}
}
