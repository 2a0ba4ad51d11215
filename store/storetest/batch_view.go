package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// batchViewCases: what a batch lists (its jobs, JobFilter.BatchID) and
// what its completion job waits for agree, and a job deleted from the
// dead-letter queue leaves its key's record reading as API.md says.
func batchViewCases() []testCase {
	return []testCase{
		{"BatchCreate/on_finish_waits_only_for_the_batchs_own_jobs", testOnFinishOwnJobsOnly},
		{"BatchCreate/on_finish_of_a_batch_of_existing_jobs_is_available", testOnFinishAllExisting},
		{"JobGet/cancelled_running_job_reads_held_until_acknowledged", testCancelledHeldRead},
		{"Records/job_deleted_from_the_dlq_reads_failed", testRecordDeletedJobFailed},
	}
}

// testOnFinishOwnJobsOnly: an item of a batch whose key dedups onto a job
// of another batch (or of none) gets that job, which stays where it was:
// it is not listed in this batch, and this batch's completion job does not
// wait for it, so the batch's view (its jobs, counts, finished) and its
// completion agree.
func testOnFinishOwnJobsOnly(t *testing.T, s store.Store) {
	plain := insert1(t, s, at(0), keyed("k", "plain-1", "fp"))
	a, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "view-a",
		Jobs: []*store.JobInsertParams{keyed("k", "key-1", "fp")}, Now: at(0)})
	wantOK(t, "BatchCreate a", err)
	b, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "view-b",
		Jobs: []*store.JobInsertParams{keyed("k", "key-1", "fp"), keyed("k", "plain-1", "fp"),
			keyed("own", "own-1", "fp"), keyed("own", "own-1", "fp")},
		OnFinish: onFinishJob(), Now: at(time.Second)})
	wantOK(t, "BatchCreate b", err)
	if !b.Jobs[0].Existing || b.Jobs[0].Job.ID != a.Jobs[0].Job.ID || !b.Jobs[1].Existing || b.Jobs[1].Job.ID != plain.ID {
		t.Fatalf("batch b's first items: %+v %+v, want batch a's job %d and the plain job %d", b.Jobs[0], b.Jobs[1],
			a.Jobs[0].Job.ID, plain.ID)
	}
	own := b.Jobs[2].Job.ID
	if b.Jobs[3].Job.ID != own {
		t.Fatalf("batch b's repeated item: job %d, want %d", b.Jobs[3].Job.ID, own)
	}
	wantIDSet(t, "batch b's jobs", ids(listAll(t, s, store.JobFilter{BatchID: b.Batch.ID})), []int64{own})
	of := wantState(t, s, b.OnFinish, idemtype.StatePending)
	wantIDs(t, "completion job's dependencies", sorted(of.DependsOn), []int64{own})
	completeJob(t, s, b.Jobs[2].Job, at(2*time.Second), `1`)
	// Batch a's job and the plain job have not run: batch b's own job is
	// all it lists and all its completion waits for.
	wantState(t, s, a.Jobs[0].Job.ID, idemtype.StateAvailable)
	wantState(t, s, plain.ID, idemtype.StateAvailable)
	wantState(t, s, b.OnFinish, idemtype.StateAvailable)
}

// testOnFinishAllExisting: a batch whose every item dedups onto a job of
// another batch lists no job, is finished, and its completion job waits
// for nothing: it is available at once.
func testOnFinishAllExisting(t *testing.T, s store.Store) {
	a, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "all-a",
		Jobs: []*store.JobInsertParams{keyed("k", "shared-1", "fp")}, Now: at(0)})
	wantOK(t, "BatchCreate a", err)
	b, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "all-b",
		Jobs: []*store.JobInsertParams{keyed("k", "shared-1", "fp")}, OnFinish: onFinishJob(), Now: at(time.Second)})
	wantOK(t, "BatchCreate b", err)
	if !b.Jobs[0].Existing || b.Jobs[0].Job.ID != a.Jobs[0].Job.ID {
		t.Fatalf("batch b's item: %+v, want batch a's job %d", b.Jobs[0], a.Jobs[0].Job.ID)
	}
	if got := listAll(t, s, store.JobFilter{BatchID: b.Batch.ID}); len(got) != 0 {
		t.Fatalf("batch b lists %v, want none", ids(got))
	}
	of := wantState(t, s, b.OnFinish, idemtype.StateAvailable)
	if len(of.DependsOn) != 0 {
		t.Errorf("completion job depends on %v, want nothing", of.DependsOn)
	}
}

// testCancelledHeldRead: a job cancelled while it runs reads Held until
// its handler is known to have returned (the refused finish) — exactly
// while the jobs waiting for any outcome of it (a batch's completion job)
// still wait — and not Held afterwards; a job cancelled while it waits
// never reads Held.
func testCancelledHeldRead(t *testing.T, s store.Store) {
	r := batchWithOnFinish(t, s, "HELD", 2, at(0))
	c := claimJob(t, s, r.Jobs[0].Job, at(0))
	if c.Held {
		t.Errorf("running job reads Held")
	}
	cancelJob(t, s, c, at(time.Second))
	cancelJob(t, s, r.Jobs[1].Job, at(time.Second))
	if got := wantState(t, s, r.Jobs[0].Job.ID, idemtype.StateCancelled); !got.Held {
		t.Errorf("job cancelled while it ran reads Held false while its handler may still run")
	}
	if got := wantState(t, s, r.Jobs[1].Job.ID, idemtype.StateCancelled); got.Held {
		t.Errorf("job cancelled while it waited reads Held")
	}
	for _, j := range listAll(t, s, store.JobFilter{BatchID: r.Batch.ID}) {
		if want := j.ID == c.ID; j.Held != want {
			t.Errorf("batch list: job %d Held %v, want %v", j.ID, j.Held, want)
		}
	}
	wantState(t, s, r.OnFinish, idemtype.StatePending)
	if errs := finishAll(t, s, completion(c, `1`, at(2*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled job: %v, want ErrLeaseLost", errs[0])
	}
	if got := wantState(t, s, c.ID, idemtype.StateCancelled); got.Held {
		t.Errorf("job reads Held after its handler returned")
	}
	wantState(t, s, r.OnFinish, idemtype.StateAvailable)
}

// testRecordDeletedJobFailed: the record of a keyed job that died and was
// deleted from the dead-letter queue inside its window reads failed (its
// job died without a result), naming the deleted job, not in_progress;
// the statistics count it failed too.
func testRecordDeletedJobFailed(t *testing.T, s store.Store) {
	j := killJob(t, s, insert1(t, s, at(0), keyed("k", "gone", "fp")), at(0))
	if err := s.JobDelete(t.Context(), &store.JobDeleteParams{Tenant: "default", ID: j.ID,
		State: idemtype.StateDead}); err != nil {
		t.Fatalf("JobDelete: %v", err)
	}
	got := record(t, s, "default", "gone", at(2*time.Second))
	if got.Status != idemtype.RecordFailed || got.JobID != j.ID || got.Result != nil || got.LeaseOwner != "" {
		t.Errorf("record of a job deleted from the DLQ: status %q job %d result %s lease %q, want failed job %d",
			got.Status, got.JobID, got.Result, got.LeaseOwner, j.ID)
	}
	st, err := s.RecordStats(t.Context(), &store.RecordStatsParams{Now: at(2 * time.Second)})
	wantOK(t, "RecordStats", err)
	if st.InProgress != 0 || st.Failed != 1 {
		t.Errorf("stats: in progress %d failed %d, want 0 and 1", st.InProgress, st.Failed)
	}
	// A plain record in progress (a Do's, no job) stays in progress.
	acquire(t, s, acq("do-key", "owner", at(2*time.Second)))
	if got := record(t, s, "default", "do-key", at(3*time.Second)); got.Status != idemtype.RecordInProgress {
		t.Errorf("record of a Do: status %q, want in_progress", got.Status)
	}
}
