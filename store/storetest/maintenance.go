package storetest

import (
	"errors"
)
import (
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func maintenanceCases() []testCase {
	return []testCase{
		{"JobRescue/expired_leases", testRescue},
		{"JobRescue/releases_record_lease", testRescueRecord},
		{"JobRescue/limit", testRescueLimit},
		{"JobRescue/heartbeat_keeps_job", testRescueHeartbeat},
		{"JobReleaseMany/gives_jobs_back", testRelease},
		{"JobPromote/due_jobs", testPromote},
		{"JobDeleteFinished/by_state_and_cutoff", testDeleteFinished},
		{"JobDeleteFinished/keeps_open_dedup_window", testDeleteFinishedWindow},
		{"JobDeleteFinished/limit", testDeleteFinishedLimit},
		{"RecordDeleteExpired/expired_only_up_to_limit", testRecordDeleteExpired},
		{"JobRescue/retryable_or_dead_attempt_lost_lease_lost", testRescueLifecycle},
		{"JobRescue/returns_jobs_as_rescued", testRescueReturnsRows},
	}
}

// rescue runs JobRescue and returns the ids of the jobs it rescued.
func rescue(t *testing.T, s store.Store, now time.Time, limit int) []int64 {
	t.Helper()
	got, err := s.JobRescue(t.Context(), &store.JobRescueParams{Now: now, Limit: limit})
	if err != nil {
		t.Fatalf("JobRescue: %v", err)
	}
	return rescuedIDs(got)
}

// rescuedIDs returns the ids of jobs, in order.
func rescuedIDs(jobs []store.RescuedJob) []int64 {
	ids := make([]int64, 0, len(jobs))
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// claimLease claims j with a lease until leaseUntil.
func claimLease(t *testing.T, s store.Store, j *idemtype.JobRow, now, leaseUntil time.Time) *idemtype.JobRow {
	t.Helper()
	got := claimWith(t, s, &store.JobClaimParams{Tenant: j.Tenant, Queues: []string{j.Queue}, Kinds: []string{j.Kind},
		WorkerID: "w1", Limit: 1, LeaseUntil: leaseUntil, Now: now})
	if len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("claim of job %d: %v", j.ID, ids(got))
	}
	return got[0]
}

func testRescue(t *testing.T, s store.Store) {
	once := newJob("once")
	once.MaxAttempts = 1
	js := insertNew(t, s, at(0), newJob("retry"), once, newJob("long"))
	dep := insert1(t, s, at(0), dependsOn("dep", js[1]))
	c0 := claimLease(t, s, js[0], at(0), at(30*time.Second))
	c1 := claimLease(t, s, js[1], at(0), at(30*time.Second))
	claimLease(t, s, js[2], at(0), at(time.Hour))

	if got := rescue(t, s, at(10*time.Second), 100); len(got) != 0 {
		t.Errorf("rescued %v before the leases expired", got)
	}
	now := at(time.Minute)
	wantIDSet(t, "rescued", rescue(t, s, now, 100), []int64{c0.ID, c1.ID})

	r := wantState(t, s, c0.ID, idemtype.StateRetryable)
	wantTime(t, "RunAt of a rescued job", r.RunAt, now)
	if r.LastError == "" || r.Attempt != 1 {
		t.Errorf("rescued job: last error %q attempt %d", r.LastError, r.Attempt)
	}
	wantNoLease(t, r)
	wantNil(t, "FinishedAt of a retryable job", r.FinishedAt)

	d := wantState(t, s, c1.ID, idemtype.StateDead)
	wantTimeP(t, "FinishedAt of a rescued dead job", d.FinishedAt, now)
	if d.LastError == "" {
		t.Errorf("dead rescued job without LastError")
	}
	wantNoLease(t, d)
	wantState(t, s, js[2].ID, idemtype.StateRunning)
	dp := wantState(t, s, dep.ID, idemtype.StateCancelled)
	wantMentions(t, "LastError of the dependant", dp.LastError, c1.ID, "dead")

	for _, id := range []int64{c0.ID, c1.ID} {
		as := attempts(t, s, id)
		if len(as) != 1 || as[0].Outcome != idemtype.OutcomeLost {
			t.Errorf("job %d attempts %s, want one lost", id, fmtAttempts(as))
		} else {
			wantTimeP(t, "lost attempt FinishedAt", as[0].FinishedAt, now)
		}
	}
	wantErr(t, "finish after rescue", finishAll(t, s, completion(c0, `1`, now))[0], idemtype.ErrLeaseLost)
	wantErr(t, "heartbeat after rescue", heartbeat(t, s, at(time.Hour), now, leaseOf(c0))[0], idemtype.ErrLeaseLost)
	// The rescue counted as an attempt: the next claim is attempt 2.
	if c := claimJob(t, s, js[0], now); c.Attempt != 2 {
		t.Errorf("claim after rescue: attempt %d, want 2", c.Attempt)
	}
}

func testRescueRecord(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), keyed("k", "K", "fp"))
	claimLease(t, s, j, at(0), at(30*time.Second))
	acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: store.JobOwner(j.ID), JobID: j.ID,
		LeaseUntil: at(30 * time.Second), Now: at(0)})
	// Another Do-style key held by someone else is untouched.
	acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "D", Owner: "other", LeaseUntil: at(time.Hour),
		DedupUntil: at(time.Hour), ExpiresAt: at(48 * time.Hour), Now: at(0)})
	wantIDs(t, "rescued", rescue(t, s, at(time.Minute), 10), []int64{j.ID})
	r := record(t, s, "default", "K", at(time.Minute))
	if r.LeaseOwner != "" || r.Status != idemtype.RecordInProgress {
		t.Errorf("record after rescue: owner %q status %s", r.LeaseOwner, r.Status)
	}
	if r := record(t, s, "default", "D", at(time.Minute)); r.LeaseOwner != "other" {
		t.Errorf("unrelated record lost its lease")
	}
}

func testRescueLimit(t *testing.T, s store.Store) {
	insertNew(t, s, at(0), newJob("k"), newJob("k"), newJob("k"))
	c := claim(t, s, at(0), 3)
	first := rescue(t, s, at(time.Hour), 2)
	if len(first) != 2 {
		t.Errorf("rescued %d with limit 2", len(first))
	}
	second := rescue(t, s, at(time.Hour), 2)
	wantIDSet(t, "rescued in two rounds", append(first, second...), ids(c))
}

func testRelease(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), keyed("k1", "K", "fp"), newJob("k2"))
	c0 := claimJob(t, s, js[0], at(0))
	c1 := claimJob(t, s, js[1], at(0))
	acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: store.JobOwner(c0.ID), JobID: c0.ID,
		LeaseUntil: at(time.Hour), Now: at(0)})
	now := at(time.Minute)
	n, err := s.JobReleaseMany(t.Context(), &store.JobReleaseManyParams{Leases: []store.Lease{leaseOf(c0), {ID: c1.ID, Token: "stale"}}, Now: now})
	if err != nil {
		t.Fatalf("JobReleaseMany: %v", err)
	}
	if n != 1 {
		t.Errorf("released %d, want 1", n)
	}
	got := wantState(t, s, c0.ID, idemtype.StateAvailable)
	wantTime(t, "RunAt", got.RunAt, now)
	if got.Attempt != 0 {
		t.Errorf("Attempt %d after release, want 0", got.Attempt)
	}
	wantNoLease(t, got)
	wantNil(t, "FinishedAt", got.FinishedAt)
	if as := attempts(t, s, c0.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeReleased {
		t.Errorf("attempts %s, want one released", fmtAttempts(as))
	}
	if r := record(t, s, "default", "K", now); r.LeaseOwner != "" {
		t.Errorf("record lease still held by %q", r.LeaseOwner)
	}
	wantState(t, s, c1.ID, idemtype.StateRunning)
	wantErr(t, "finish after release", finishAll(t, s, completion(c0, `1`, now))[0], idemtype.ErrLeaseLost)
	if c := claimJob(t, s, js[0], now); c.Attempt != 1 {
		t.Errorf("claim after release: attempt %d, want 1", c.Attempt)
	}
}

func testPromote(t *testing.T, s store.Store) {
	mk := func(queue, kind string, runAt time.Duration) *store.JobInsertParams {
		p := newJob(kind)
		p.Queue, p.RunAt = queue, at(runAt)
		return p
	}
	js := insertNew(t, s, at(0), mk("q1", "s1", time.Minute), mk("q1", "s2", time.Minute), mk("q3", "future", time.Hour),
		mk("q4", "avail", 0), mk("q2", "retry", 0))
	r := claimJob(t, s, js[4], at(0))
	finish1(t, s, failure(r, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(2*time.Minute), at(time.Second)))
	dep := insert1(t, s, at(0), dependsOn("pending", js[2]))

	queues, err := s.JobPromote(t.Context(), &store.JobPromoteParams{Now: at(3 * time.Minute), Limit: 100})
	if err != nil {
		t.Fatalf("JobPromote: %v", err)
	}
	slices.Sort(queues)
	queues = slices.Compact(queues)
	if !slices.Equal(queues, []string{"q1", "q2"}) {
		t.Errorf("promoted queues %v, want [q1 q2]", queues)
	}
	for _, i := range []int{0, 1, 3, 4} {
		wantState(t, s, js[i].ID, idemtype.StateAvailable)
	}
	wantState(t, s, js[2].ID, idemtype.StateScheduled)
	wantState(t, s, dep.ID, idemtype.StatePending)
	if got := wantState(t, s, js[4].ID, idemtype.StateAvailable); got.Attempt != 1 {
		t.Errorf("promotion changed Attempt to %d", got.Attempt)
	}

	more := insertNew(t, s, at(0), mk("q5", "a", time.Minute), mk("q5", "b", time.Minute), mk("q5", "c", time.Minute))
	if _, err := s.JobPromote(t.Context(), &store.JobPromoteParams{Now: at(3 * time.Minute), Limit: 2}); err != nil {
		t.Fatalf("JobPromote: %v", err)
	}
	n := 0
	for _, j := range more {
		if mustGet(t, s, j.ID).State == idemtype.StateAvailable {
			n++
		}
	}
	if n != 2 {
		t.Errorf("promoted %d with limit 2", n)
	}
}

// deleteFinished runs JobDeleteFinished.
func deleteFinished(t *testing.T, s store.Store, p *store.JobDeleteFinishedParams) int {
	t.Helper()
	n, err := s.JobDeleteFinished(t.Context(), p)
	if err != nil {
		t.Fatalf("JobDeleteFinished: %v", err)
	}
	return n
}

// gone checks a job and its attempts no longer exist.
func gone(t *testing.T, s store.Store, id int64) {
	t.Helper()
	_, err := s.JobGet(t.Context(), &store.JobGetParams{Tenant: "", ID: id})
	wantErr(t, "JobGet of a deleted job", err, idemtype.ErrNotFound)
	_, err = s.AttemptList(t.Context(), &store.AttemptListParams{Tenant: "", JobID: id})
	wantErr(t, "AttemptList of a deleted job", err, idemtype.ErrNotFound)
}

func testDeleteFinished(t *testing.T, s store.Store) {
	c1 := completeJob(t, s, insert1(t, s, at(0), newJob("c1")), at(time.Minute), `1`) // finished at(1m1s)
	c2 := completeJob(t, s, insert1(t, s, at(0), newJob("c2")), at(3*time.Hour), `1`) // finished at(3h+1s)
	x1 := cancelJob(t, s, insert1(t, s, at(0), newJob("x1")), at(time.Minute))        // at(1m)
	d1 := killJob(t, s, insert1(t, s, at(0), newJob("d1")), at(time.Minute))          // at(1m1s)
	avail := insert1(t, s, at(0), newJob("avail"))
	run := claimJob(t, s, insert1(t, s, at(0), newJob("run")), at(0))

	now := at(4 * time.Hour)
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CompletedBefore: at(time.Hour), Limit: 100, Now: now}); n != 1 {
		t.Errorf("deleted %d completed jobs, want 1", n)
	}
	gone(t, s, c1.ID)
	wantState(t, s, c2.ID, idemtype.StateCompleted)
	wantState(t, s, x1.ID, idemtype.StateCancelled)
	wantState(t, s, d1.ID, idemtype.StateDead)

	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CancelledBefore: at(time.Hour), Limit: 100, Now: now}); n != 1 {
		t.Errorf("deleted %d cancelled jobs, want 1", n)
	}
	gone(t, s, x1.ID)
	wantState(t, s, d1.ID, idemtype.StateDead)
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{DeadBefore: at(time.Minute), Limit: 100, Now: now}); n != 0 {
		t.Errorf("deleted %d dead jobs finished after the cutoff", n)
	}
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CompletedBefore: now, CancelledBefore: now, DeadBefore: now, Limit: 100, Now: now}); n != 2 {
		t.Errorf("deleted %d, want 2 (c2, d1)", n)
	}
	gone(t, s, c2.ID)
	gone(t, s, d1.ID)
	wantState(t, s, avail.ID, idemtype.StateAvailable)
	wantState(t, s, run.ID, idemtype.StateRunning)
}

func testDeleteFinishedWindow(t *testing.T, s store.Store) {
	p := keyed("k", "K", "fp")
	p.DedupWindow = 24 * time.Hour
	j := completeJob(t, s, insert1(t, s, at(0), p), at(time.Minute), `1`)
	plain := completeJob(t, s, insert1(t, s, at(0), newJob("plain")), at(time.Minute), `1`)
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CompletedBefore: at(time.Hour), Limit: 100, Now: at(2 * time.Hour)}); n != 1 {
		t.Errorf("deleted %d, want 1 (the job without a key)", n)
	}
	gone(t, s, plain.ID)
	wantState(t, s, j.ID, idemtype.StateCompleted)
	wantExisting(t, "key still deduplicates", insertAll(t, s, at(3*time.Hour), p)[0], j.ID, idemtype.StateCompleted)
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CompletedBefore: at(25 * time.Hour), Limit: 100, Now: at(25 * time.Hour)}); n != 1 {
		t.Errorf("deleted %d after the window closed, want 1", n)
	}
	gone(t, s, j.ID)
}

func testDeleteFinishedLimit(t *testing.T, s store.Store) {
	for _, k := range []string{"a", "b", "c"} {
		completeJob(t, s, insert1(t, s, at(0), newJob(k)), at(0), `1`)
	}
	p := &store.JobDeleteFinishedParams{CompletedBefore: at(time.Hour), Limit: 2, Now: at(time.Hour)}
	if n := deleteFinished(t, s, p); n != 2 {
		t.Errorf("deleted %d with limit 2", n)
	}
	if n := deleteFinished(t, s, p); n != 1 {
		t.Errorf("deleted %d in the second round, want 1", n)
	}
	if n := len(listAll(t, s, store.JobFilter{})); n != 0 {
		t.Errorf("%d jobs left", n)
	}
}

func testRecordDeleteExpired(t *testing.T, s store.Store) {
	for _, k := range []string{"a", "b", "c"} {
		p := acq(k, "o", at(0))
		p.ExpiresAt = at(time.Hour)
		acquire(t, s, p)
	}
	p := acq("later", "o", at(0))
	p.ExpiresAt = at(2 * time.Hour)
	acquire(t, s, p)
	z := keyed("k", "Z", "fp")
	z.DedupWindow = 0
	insert1(t, s, at(0), z) // ExpiresAt nil while its job is unfinished

	del := func(now time.Time, limit int) int {
		t.Helper()
		n, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: now, Limit: limit})
		if err != nil {
			t.Fatalf("RecordDeleteExpired: %v", err)
		}
		return n
	}
	if n := del(at(time.Hour-time.Second), 100); n != 0 {
		t.Errorf("deleted %d live records", n)
	}
	if n := del(at(time.Hour), 2); n != 2 {
		t.Errorf("deleted %d with limit 2, want 2", n)
	}
	if n := del(at(time.Hour), 2); n != 1 {
		t.Errorf("deleted %d in the second round, want 1", n)
	}
	st, err := s.RecordStats(t.Context(), &store.RecordStatsParams{Tenant: "", Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("RecordStats: %v", err)
	}
	if st.Expired != 0 || st.Entries != 2 {
		t.Errorf("stats after deleting: %+v, want 2 entries and none expired", *st)
	}
	if n := del(at(1000*time.Hour), 100); n != 1 {
		t.Errorf("deleted %d, want 1 (not the record of an unfinished job)", n)
	}
	record(t, s, "default", "Z", at(1000*time.Hour))
}

func testRescueHeartbeat(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimLease(t, s, j, at(0), at(30*time.Second))
	wantOK(t, "heartbeat", heartbeat(t, s, at(time.Hour), at(10*time.Second), leaseOf(c))[0])
	if got := rescue(t, s, at(time.Minute), 10); len(got) != 0 {
		t.Errorf("rescued %v whose lease was extended", got)
	}
	wantState(t, s, j.ID, idemtype.StateRunning)
	wantIDs(t, "rescued after the extended lease", rescue(t, s, at(time.Hour+time.Second), 10), []int64{j.ID})
}

func testRescueLifecycle(t *testing.T, s store.Store) {
	p := newJob("r")
	p.MaxAttempts = 1
	a := insertAll(t, s, base, newJob("r"), p)
	got := claim(t, s, base, 10)
	if len(got) != 2 {
		t.Fatalf("claimed %d", len(got))
	}
	ctx := t.Context()
	if rescued, err := s.JobRescue(ctx, &store.JobRescueParams{Now: base.Add(30 * time.Second), Limit: 10}); err != nil || len(rescued) != 0 {
		t.Fatalf("early rescue: %v %v", rescued, err)
	}
	rescued, err := s.JobRescue(ctx, &store.JobRescueParams{Now: base.Add(lease + time.Minute), Limit: 10})
	if err != nil || len(rescued) != 2 {
		t.Fatalf("rescue: %v %v", rescued, err)
	}
	if j := mustGet(t, s, a[0].Job.ID); j.State != idemtype.StateRetryable || j.LastError != store.RescuedError {
		t.Fatalf("rescued: %s %q, want retryable %q", j.State, j.LastError, store.RescuedError)
	}
	if j := mustGet(t, s, a[1].Job.ID); j.State != idemtype.StateDead || j.FinishedAt == nil {
		t.Fatalf("rescued at max attempts: %s", j.State)
	}
	att, err := s.AttemptList(ctx, &store.AttemptListParams{Tenant: "default", JobID: a[0].Job.ID})
	if err != nil || len(att) != 1 || att[0].Outcome != idemtype.OutcomeLost {
		t.Fatalf("attempts: %+v %v", att, err)
	}
	// The old lease is lost.
	errs, err := s.JobFinishMany(ctx, []*store.JobFinishParams{{ID: got[0].ID, LeaseToken: got[0].LeaseToken,
		State: idemtype.StateCompleted, FinishedAt: base}})
	if err != nil || !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish after rescue: %v %v", err, errs)
	}
}
