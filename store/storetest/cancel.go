package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func cancelCases() []testCase {
	return []testCase{
		{"JobCancel/unfinished_states", testCancelUnfinished},
		{"JobCancel/running_voids_lease", testCancelRunning},
		{"JobCancel/reports_voided_lease", testCancelVoided},
		{"JobCancel/finished_wrong_state", testCancelFinished},
		{"JobCancel/other_tenant_not_found", testCancelTenant},
		{"JobCancel/cancels_dependants", testCancelDependants},
		{"JobCancel/releases_record_lease", testCancelRecordLease},
	}
}

func retryCases() []testCase {
	return []testCase{
		{"JobRetryMany/by_ids", testRetryByIDs},
		{"JobRetryMany/only_from_states", testRetryFromStates},
		{"JobRetryMany/future_run_at_scheduled", testRetryFuture},
		{"JobRetryMany/by_filter", testRetryByFilter},
	}
}

func testCancelUnfinished(t *testing.T, s store.Store) {
	dep := insert1(t, s, at(0), newJob("dep"))
	sp := newJob("scheduled")
	sp.RunAt = at(time.Hour)
	js := insertNew(t, s, at(0), newJob("available"), sp, dependsOn("pending", dep), newJob("retryable"))
	r := claimJob(t, s, js[3], at(0))
	finish1(t, s, failure(r, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Hour), at(time.Second)))
	for _, j := range js {
		got, err := s.JobCancel(t.Context(), &store.JobCancelParams{Tenant: "default", ID: j.ID, Reason: "no longer needed", Now: at(time.Minute)})
		if err != nil {
			t.Fatalf("cancel %s: %v", j.Kind, err)
		}
		for _, row := range []*idemtype.JobRow{got, mustGet(t, s, j.ID)} {
			if row.State != idemtype.StateCancelled || row.LastError != "no longer needed" {
				t.Errorf("%s: state %s last error %q", j.Kind, row.State, row.LastError)
			}
			wantTimeP(t, j.Kind+" FinishedAt", row.FinishedAt, at(time.Minute))
		}
	}
	if got := claim(t, s, at(2*time.Hour), 10); len(got) != 1 || got[0].ID != dep.ID {
		t.Errorf("claim after cancelling: %v, want only %d", ids(got), dep.ID)
	}
}

func testCancelRunning(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	got := cancelJob(t, s, j, at(time.Minute))
	if got.State != idemtype.StateCancelled {
		t.Errorf("state %s", got.State)
	}
	wantNoLease(t, mustGet(t, s, j.ID))
	wantErr(t, "heartbeat after cancel", heartbeat(t, s, at(time.Hour), at(time.Minute), leaseOf(c))[0], idemtype.ErrLeaseLost)
	wantErr(t, "finish after cancel", finishAll(t, s, completion(c, `1`, at(2*time.Minute)))[0], idemtype.ErrLeaseLost)
	got = wantState(t, s, j.ID, idemtype.StateCancelled)
	if got.Result != nil {
		t.Errorf("finish after cancel stored a result")
	}
	as := attempts(t, s, j.ID)
	if len(as) != 1 || as[0].Outcome != idemtype.OutcomeCancelled {
		t.Errorf("attempts %s, want one cancelled", fmtAttempts(as))
	} else {
		wantTimeP(t, "attempt FinishedAt", as[0].FinishedAt, at(time.Minute))
	}
}

// testCancelVoided: the cancel of a running job reports the lease it
// voided (the runtime stops that claim's handler by it, even before the
// claim reached the producer); the cancel of a job that is not running
// leaves Voided as it was.
func testCancelVoided(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), newJob("running"), newJob("available"))
	c := claimJob(t, s, js[0], at(0))
	var voided store.Lease
	if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: c.ID, Reason: "stop", Now: at(time.Second), Voided: &voided}); err != nil {
		t.Fatalf("cancel running: %v", err)
	}
	if c.LeaseToken == "" || voided != leaseOf(c) {
		t.Errorf("voided %+v, want the claim's lease %+v", voided, leaseOf(c))
	}
	untouched := store.Lease{ID: -1, Token: "before"}
	voided = untouched
	if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: js[1].ID, Reason: "stop", Now: at(time.Second), Voided: &voided}); err != nil {
		t.Fatalf("cancel available: %v", err)
	}
	if voided != untouched {
		t.Errorf("the cancel of an available job reported voiding %+v", voided)
	}
}

func testCancelFinished(t *testing.T, s store.Store) {
	done := completeJob(t, s, insert1(t, s, at(0), newJob("done")), at(0), `1`)
	dead := killJob(t, s, insert1(t, s, at(0), newJob("dead")), at(0))
	cancelled := cancelJob(t, s, insert1(t, s, at(0), newJob("cancelled")), at(0))
	for _, j := range []*idemtype.JobRow{done, dead, cancelled} {
		_, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: j.ID, Reason: "again", Now: at(time.Hour)})
		wantErr(t, "cancel of a "+string(j.State)+" job", err, idemtype.ErrWrongState)
		got := wantState(t, s, j.ID, j.State)
		if got.LastError == "again" {
			t.Errorf("refused cancel changed LastError")
		}
	}
}

func testCancelTenant(t *testing.T, s store.Store) {
	p := newJob("k")
	p.Tenant = "a"
	j := insert1(t, s, at(0), p)
	_, err := s.JobCancel(t.Context(), &store.JobCancelParams{Tenant: "b", ID: j.ID, Now: at(time.Second)})
	wantErr(t, "cancel from another tenant", err, idemtype.ErrNotFound)
	_, err = s.JobCancel(t.Context(), &store.JobCancelParams{Tenant: "a", ID: j.ID + 1000, Now: at(time.Second)})
	wantErr(t, "cancel of an unknown job", err, idemtype.ErrNotFound)
	wantState(t, s, j.ID, idemtype.StateAvailable)
	if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{Tenant: "a", ID: j.ID, Now: at(time.Second)}); err != nil {
		t.Errorf("cancel in its tenant: %v", err)
	}
}

func testCancelDependants(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	b := insert1(t, s, at(0), dependsOn("b", a))
	c := insert1(t, s, at(0), dependsOn("c", b))
	cancelJob(t, s, a, at(time.Minute))
	checkCancelledDependants(t, s, a, "cancelled", at(time.Minute), b, c)
}

func testCancelRecordLease(t *testing.T, s store.Store) {
	p := keyed("k", "K", "fp")
	p.DedupWindow = 0
	j := insert1(t, s, at(0), p)
	claimJob(t, s, j, at(0))
	acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: store.JobOwner(j.ID), JobID: j.ID,
		LeaseUntil: at(time.Hour), Now: at(0)})
	cancelJob(t, s, j, at(time.Minute))
	r := record(t, s, "default", "K", at(time.Minute-time.Second))
	if r.LeaseOwner != "" || r.Status != idemtype.RecordFailed {
		t.Errorf("record after cancel: owner %q status %s", r.LeaseOwner, r.Status)
	}
	wantTimeP(t, "DedupUntil after cancel (window 0)", r.DedupUntil, at(time.Minute))
	wantTimeP(t, "ExpiresAt after cancel (window 0)", r.ExpiresAt, at(time.Minute))
	if j2 := insert1(t, s, at(time.Minute), p); j2.ID == j.ID {
		t.Errorf("window 0 key still blocked after cancel")
	}
}

func testRetryByIDs(t *testing.T, s store.Store) {
	mk := func(kind string) *store.JobInsertParams {
		p := newJob(kind)
		p.MaxAttempts = 4
		return p
	}
	dead := killJob(t, s, insert1(t, s, at(0), mk("dead")), at(0))
	cancelled := cancelJob(t, s, insert1(t, s, at(0), mk("cancelled")), at(0))
	done := completeJob(t, s, insert1(t, s, at(0), mk("done")), at(0), `1`)
	running := claimJob(t, s, insert1(t, s, at(0), mk("running")), at(0))
	avail := insert1(t, s, at(0), mk("avail"))
	now := at(time.Hour)
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{
		IDs:        []int64{dead.ID, cancelled.ID, done.ID, running.ID, avail.ID, 99999},
		FromStates: []idemtype.JobState{idemtype.StateDead, idemtype.StateCancelled}, Now: now})
	if err != nil {
		t.Fatalf("JobRetryMany: %v", err)
	}
	wantIDSet(t, "moved", ids(moved), []int64{dead.ID, cancelled.ID})
	for _, j := range moved {
		for _, row := range []*idemtype.JobRow{j, mustGet(t, s, j.ID)} {
			if row.State != idemtype.StateAvailable || row.Attempt != 0 || row.MaxAttempts != 4 {
				t.Errorf("retried job %d: state %s attempt %d max %d", row.ID, row.State, row.Attempt, row.MaxAttempts)
			}
			wantNil(t, "FinishedAt", row.FinishedAt)
			wantTime(t, "RunAt = Now", row.RunAt, now)
		}
	}
	wantState(t, s, done.ID, idemtype.StateCompleted)
	wantState(t, s, running.ID, idemtype.StateRunning)
	wantState(t, s, avail.ID, idemtype.StateAvailable)
	got := claimJob(t, s, dead, now)
	if got.Attempt != 1 {
		t.Errorf("first claim after retry: attempt %d, want 1", got.Attempt)
	}
}

func testRetryFromStates(t *testing.T, s store.Store) {
	dead := killJob(t, s, insert1(t, s, at(0), newJob("dead")), at(0))
	cancelled := cancelJob(t, s, insert1(t, s, at(0), newJob("cancelled")), at(0))
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{dead.ID, cancelled.ID},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("JobRetryMany: %v", err)
	}
	wantIDs(t, "moved", ids(moved), []int64{dead.ID})
	wantState(t, s, cancelled.ID, idemtype.StateCancelled)
}

func testRetryFuture(t *testing.T, s store.Store) {
	dead := killJob(t, s, insert1(t, s, at(0), newJob("dead")), at(0))
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{dead.ID},
		FromStates: []idemtype.JobState{idemtype.StateDead}, RunAt: at(2 * time.Hour), Now: at(time.Hour)})
	if err != nil || len(moved) != 1 {
		t.Fatalf("JobRetryMany: %v %v", ids(moved), err)
	}
	got := wantState(t, s, dead.ID, idemtype.StateScheduled)
	wantTime(t, "RunAt", got.RunAt, at(2*time.Hour))
	if n := len(claim(t, s, at(time.Hour), 10)); n != 0 {
		t.Errorf("claimed a job retried into the future")
	}
	claimJob(t, s, dead, at(2*time.Hour))
}

func testRetryByFilter(t *testing.T, s store.Store) {
	mk := func(tenant, queue, kind string) *idemtype.JobRow {
		p := newJob(kind)
		p.Tenant, p.Queue = tenant, queue
		return killJob(t, s, insert1(t, s, at(0), p), at(0))
	}
	q1a := mk("a", "q1", "k1")
	q1b := mk("a", "q1", "k2")
	mk("a", "q2", "k3")
	mk("b", "q1", "k4")
	cancelled := cancelJob(t, s, insert1(t, s, at(0), &store.JobInsertParams{Tenant: "a", Queue: "q1", Kind: "k5",
		Args: []byte(`{}`), MaxAttempts: 1, RunAt: base}), at(0))
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{
		Filter:     store.JobFilter{Tenant: "a", Queue: "q1"},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Limit: 1, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("JobRetryMany: %v", err)
	}
	if len(moved) != 1 {
		t.Fatalf("moved %d jobs with limit 1", len(moved))
	}
	moved2, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{
		Filter:     store.JobFilter{Tenant: "a", Queue: "q1"},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("JobRetryMany: %v", err)
	}
	wantIDSet(t, "moved by filter", append(ids(moved), ids(moved2)...), []int64{q1a.ID, q1b.ID})
	wantState(t, s, cancelled.ID, idemtype.StateCancelled)
	stats, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Tenant: "", Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if n := count(stats, "q2", idemtype.StateDead); n != 1 {
		t.Errorf("q2 dead %d, want 1", n)
	}
	if n := count(stats, "q1", idemtype.StateDead); n != 1 {
		t.Errorf("q1 dead %d, want 1 (tenant b's)", n)
	}
	// Filter.Tenant applies to IDs too.
	other := mk("b", "q9", "k9")
	moved3, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{other.ID},
		Filter: store.JobFilter{Tenant: "a"}, FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("JobRetryMany: %v", err)
	}
	if len(moved3) != 0 {
		t.Errorf("retried a job of another tenant by id")
	}
}
