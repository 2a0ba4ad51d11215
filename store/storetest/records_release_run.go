package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func recordReleaseRunCases() []testCase {
	return []testCase{
		{"RecordRelease/job_lease_kept_for_a_later_run", testReleaseKeepsLaterRun},
	}
}

// testReleaseKeepsLaterRun: a job's run gives its key back naming its claim
// (JobLease); a later run of the same job (retried, claimed again) that
// took the key under the same owner name keeps it, while a give-back by
// the run that holds it, or of a job that no longer runs, releases it.
func testReleaseKeepsLaterRun(t *testing.T, s store.Store) {
	keyed := func(q string) *store.JobInsertParams {
		p := newJob("k")
		p.Queue, p.IdempotencyKey, p.Fingerprint = q, "X", "fp"
		p.DedupWindow, p.ResultTTL = time.Minute, time.Hour
		return p
	}
	j := insertNew(t, s, at(0), keyed("q"))[0]
	run1 := claim(t, s, at(time.Hour), 1, "q")[0]
	cancelJob(t, s, run1, at(time.Hour))
	// Run 1's handler returned: its refused finish ends the cancel's hold,
	// so the retry below runs the job again at once.
	if errs := finishAll(t, s, completion(run1, `1`, at(time.Hour))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled run 1: %v, want ErrLeaseLost", errs[0])
	}
	k := insertNew(t, s, at(time.Hour), keyed("other"))[0] // the window closed: K takes X's record
	if _, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{j.ID}, Now: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	run2 := claim(t, s, at(time.Hour), 1, "q")[0]
	if run2.ID != j.ID || run2.LeaseToken == run1.LeaseToken {
		t.Fatalf("run 2: job %d token %q", run2.ID, run2.LeaseToken)
	}
	acq := func(owner string, jobID int64) bool {
		t.Helper()
		res, err := s.RecordAcquire(t.Context(), &store.RecordAcquireParams{Tenant: "default", Key: "X", Owner: owner,
			JobID: jobID, LeaseUntil: at(time.Hour + time.Minute), DedupUntil: at(time.Hour),
			ExpiresAt: at(2 * time.Hour), Now: at(time.Hour)})
		if err != nil {
			t.Fatalf("acquire by %s: %v", owner, err)
		}
		return res.Acquired
	}
	if !acq(store.JobOwner(j.ID), j.ID) {
		t.Fatal("run 2 did not take the key")
	}
	release := func(l store.Lease) {
		t.Helper()
		wantOK(t, "release", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "X",
			Owner: store.JobOwner(j.ID), JobLease: &l}))
	}
	release(leaseOf(run1))
	if acq(store.JobOwner(k.ID), k.ID) {
		t.Fatal("job K took the key held by run 2: run 1's give-back released run 2's lease")
	}
	release(leaseOf(run2))
	if !acq("do:after", 0) {
		t.Fatal("the key stayed held after run 2 gave it back")
	}
}
