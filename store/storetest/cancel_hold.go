package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// cancelHoldCases: a FIFO partition's job cancelled while it runs keeps
// its partition until its process acknowledges the cancel (the finish of
// its lease, refused) or its lease ends (the rescuer), so that its
// successor never runs beside its handler.
func cancelHoldCases() []testCase {
	return []testCase{
		{"FIFO/cancelled_running_head_holds_until_acknowledged", testCancelHoldAck},
		{"FIFO/cancelled_running_head_holds_until_lease_ends", testCancelHoldLeaseEnd},
		{"FIFO/cancelled_running_job_holds_retried_head", testCancelHoldRetriedHead},
		{"FIFO/retry_of_cancelled_running_head_waits_for_lease", testCancelHoldRetry},
		{"FIFO/cancelled_waiting_head_releases_at_once", testCancelWaitingReleases},
		{"FIFO/retention_keeps_cancelled_job_holding_partition", testCancelHoldRetention},
		{"FIFO/retry_of_holding_successor_keeps_retried_head_waiting", testCancelHoldRetrySuccessor},
		{"FIFO/cancel_of_retried_holding_job_keeps_hold", testCancelHoldRetryCancel},
	}
}

func testCancelHoldAck(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claim(t, s, at(0), 10, "q")
	wantIDs(t, "head", ids(c), []int64{js[0].ID})
	cancelJob(t, s, c[0], at(time.Second))
	if got := claim(t, s, at(2*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the cancelled head's handler may still run", ids(got))
	}
	// A heartbeat is not an acknowledgement: the handler still runs.
	errs, err := s.JobHeartbeatMany(t.Context(), &store.JobHeartbeatParams{
		Leases: []store.Lease{leaseOf(c[0])}, Until: at(time.Hour), Now: at(2 * time.Second)})
	if err != nil || !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("heartbeat of the cancelled lease: %v %v, want ErrLeaseLost", err, errs)
	}
	if got := claim(t, s, at(3*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v after a refused heartbeat of the cancelled head", ids(got))
	}
	// Another lease's finish does not acknowledge it.
	other := *c[0]
	other.LeaseToken = "not-the-lease"
	if errs := finishAll(t, s, completion(&other, `1`, at(3*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish under another token: %v, want ErrLeaseLost", errs[0])
	}
	if got := claim(t, s, at(3*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v after a finish under another lease", ids(got))
	}
	// The handler returned: its finish is refused, and acknowledges.
	if errs := finishAll(t, s, completion(c[0], `1`, at(4*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled head: %v, want ErrLeaseLost", errs[0])
	}
	r := wantState(t, s, js[0].ID, idemtype.StateCancelled)
	wantNoLease(t, r)
	if len(attempts(t, s, js[0].ID)) != 1 {
		t.Errorf("the acknowledgement wrote an attempt: %d attempts", len(attempts(t, s, js[0].ID)))
	}
	wantIDs(t, "after the acknowledgement", ids(claim(t, s, at(5*time.Second), 10, "q")), []int64{js[1].ID})
}

func testCancelHoldLeaseEnd(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claimLease(t, s, js[0], at(0), at(30*time.Second))
	cancelJob(t, s, c, at(time.Second))
	if got := rescue(t, s, at(10*time.Second), 100); len(got) != 0 {
		t.Errorf("rescued %v before the lease ended", got)
	}
	if got := claim(t, s, at(10*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the cancelled head's lease lives", ids(got))
	}
	// Rescue's rules: the lease ended, and the rescuer ends the hold (the
	// job stays cancelled, with its one cancelled attempt).
	if got := rescue(t, s, at(time.Minute), 100); len(got) != 0 {
		t.Errorf("rescue reported %v: a cancelled job is not rescued", got)
	}
	r := wantState(t, s, js[0].ID, idemtype.StateCancelled)
	if as := attempts(t, s, js[0].ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeCancelled {
		t.Errorf("attempts of the cancelled head after the rescue: %+v", as)
	}
	wantNoLease(t, r)
	wantIDs(t, "after the lease ended", ids(claim(t, s, at(time.Minute), 10, "q")), []int64{js[1].ID})
}

// testCancelHoldRetriedHead: a later job of a partition cancelled while it
// runs, after an earlier one was retried (the retried head waits for the
// running job: JobRetryMany), holds the partition against that head too.
func testCancelHoldRetriedHead(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claim(t, s, at(0), 10, "q")
	finish1(t, s, failure(c[0], idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(time.Second)))
	c2 := claim(t, s, at(2*time.Second), 10, "q")
	wantIDs(t, "successor", ids(c2), []int64{js[1].ID})
	if _, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{js[0].ID}, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	cancelJob(t, s, c2[0], at(4*time.Second))
	if got := claim(t, s, at(5*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the cancelled successor's handler may still run", ids(got))
	}
	if errs := finishAll(t, s, completion(c2[0], `1`, at(6*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled job: %v, want ErrLeaseLost", errs[0])
	}
	wantIDs(t, "retried head after the acknowledgement", ids(claim(t, s, at(7*time.Second), 10, "q")), []int64{js[0].ID})
}

// testCancelHoldRetry: a cancelled head retried while its cancelled
// handler may still run is not claimed before that lease ends.
func testCancelHoldRetry(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claimLease(t, s, js[0], at(0), at(30*time.Second))
	cancelJob(t, s, c, at(time.Second))
	if _, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{js[0].ID}, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, at(10*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the cancelled attempt's lease lives", ids(got))
	}
	got := claim(t, s, at(30*time.Second), 10, "q")
	wantIDs(t, "retried head once the old lease ended", ids(got), []int64{js[0].ID})
	// The old attempt's finish neither finishes nor disturbs the new one.
	if errs := finishAll(t, s, completion(c, `1`, at(31*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the old lease: %v, want ErrLeaseLost", errs[0])
	}
	wantState(t, s, js[0].ID, idemtype.StateRunning)
	if again := claim(t, s, at(32*time.Second), 10, "q"); len(again) != 0 {
		t.Fatalf("claimed %v while the retried head runs", ids(again))
	}
}

// testCancelWaitingReleases: a head cancelled before it ran has no
// handler to wait for: its partition moves on at once.
func testCancelWaitingReleases(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claim(t, s, at(0), 10, "q")
	finish1(t, s, failure(c[0], idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Hour), at(time.Second)))
	cancelJob(t, s, js[0], at(2*time.Second))
	wantIDs(t, "after a cancelled retryable head", ids(claim(t, s, at(3*time.Second), 10, "q")), []int64{js[1].ID})
}

// testCancelHoldRetention: retention does not delete a cancelled job that
// still holds its partition (its handler may still run), whatever the
// cancelled retention: deleting the row would end the hold, and the
// partition's next job would run beside the handler. Once the hold ends
// the job is deleted as any other.
func testCancelHoldRetention(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claimLease(t, s, js[0], at(0), at(time.Hour))
	cancelJob(t, s, c, at(time.Second))
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CancelledBefore: at(time.Minute),
		Limit: 100, Now: at(time.Minute)}); n != 0 {
		t.Errorf("retention deleted %d jobs, one of them cancelled and holding its partition", n)
	}
	wantState(t, s, js[0].ID, idemtype.StateCancelled)
	if got := claim(t, s, at(time.Minute), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v after retention, while the cancelled head's handler may still run", ids(got))
	}
	if errs := finishAll(t, s, completion(c, `1`, at(2*time.Minute))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled head: %v, want ErrLeaseLost", errs[0])
	}
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CancelledBefore: at(time.Minute),
		Limit: 100, Now: at(3 * time.Minute)}); n != 1 {
		t.Errorf("retention after the acknowledgement deleted %d jobs, want 1", n)
	}
	gone(t, s, js[0].ID)
}

// testCancelHoldRetrySuccessor: a dead head retried while its successor
// runs waits for it (JobRetryMany); the successor is cancelled (it holds
// the partition) and retried in turn while its handler may still run. The
// retried successor waits for its old lease to end, and so must the head:
// no job of the partition runs before that lease ends.
func testCancelHoldRetrySuccessor(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claim(t, s, at(0), 10, "q")
	finish1(t, s, failure(c[0], idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(time.Second)))
	c2 := claimLease(t, s, js[1], at(2*time.Second), at(time.Minute))
	if _, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{js[0].ID}, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	cancelJob(t, s, c2, at(4*time.Second))
	if _, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{js[1].ID}, Now: at(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, at(6*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the retried successor's cancelled handler may still run", ids(got))
	}
	wantIDs(t, "retried head once the successor's old lease ended", ids(claim(t, s, at(time.Minute), 10, "q")), []int64{js[0].ID})
}

// testCancelHoldRetryCancel: a holding job retried, then cancelled again
// before it ran, still holds its partition until the first run's lease
// ends (its handler may still run): the second cancel does not end it.
func testCancelHoldRetryCancel(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claimLease(t, s, js[0], at(0), at(time.Minute))
	cancelJob(t, s, c, at(time.Second))
	if _, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{js[0].ID}, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	cancelJob(t, s, js[0], at(3*time.Second))
	if got := claim(t, s, at(4*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("claimed %v while the first run's cancelled handler may still run", ids(got))
	}
	rescue(t, s, at(2*time.Minute), 100)
	wantIDs(t, "after the first run's lease ended", ids(claim(t, s, at(2*time.Minute), 10, "q")), []int64{js[1].ID})
}

// SeedCancelHoldUpgrade inserts jobs A and B of one FIFO partition and
// claims A, as a store before migration 0026 would hold them; the caller
// then cancels A the old way (its lease cleared, or left by a path that
// did not clear it) and migrates. It returns A and B.
func SeedCancelHoldUpgrade(t *testing.T, s store.Store) (a, b *idemtype.JobRow) {
	t.Helper()
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claim(t, s, at(0), 10, "q")
	wantIDs(t, "head before the upgrade", ids(c), []int64{js[0].ID})
	return c[0], js[1]
}

// CheckCancelHoldUpgrade checks a store migrated past 0026 after
// SeedCancelHoldUpgrade and an old-style cancel of a: the cancel released
// the partition before the upgrade (no process will acknowledge it), so b
// is claimable at once; a cancel made after the upgrade holds its
// partition until it is acknowledged.
func CheckCancelHoldUpgrade(t *testing.T, s store.Store, a, b *idemtype.JobRow) {
	t.Helper()
	wantState(t, s, a.ID, idemtype.StateCancelled)
	got := claim(t, s, at(time.Minute), 10, "q")
	wantIDs(t, "after the upgrade, behind a head cancelled before it", ids(got), []int64{b.ID})
	js := insertNew(t, s, at(time.Minute), partitioned("c1", "q", "C"), partitioned("c2", "q", "C"))
	c := claim(t, s, at(2*time.Minute), 10, "q")
	wantIDs(t, "head of a new partition", ids(c), []int64{js[0].ID})
	cancelJob(t, s, c[0], at(2*time.Minute))
	if got := claim(t, s, at(3*time.Minute), 10, "q"); len(got) != 0 {
		t.Fatalf("after the upgrade, claimed %v while a cancelled head's handler may run", ids(got))
	}
	finishAll(t, s, completion(c[0], `1`, at(3*time.Minute)))
	wantIDs(t, "after the acknowledgement", ids(claim(t, s, at(4*time.Minute), 10, "q")), []int64{js[1].ID})
}
