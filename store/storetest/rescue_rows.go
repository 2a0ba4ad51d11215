package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testRescueReturnsRows: JobRescue returns each job it rescued as the
// rescue left it — its tenant, queue, kind, the attempt whose lease was
// lost and its new state: dead on the last attempt, retryable otherwise —
// so that a report of the rescue needs no read after the commit (which
// could find the job requeued, claimed again or deleted). A job rescued
// once is not returned by the next rescue; when its next attempt's lease
// expires too, on its last attempt, it is returned dead.
func testRescueReturnsRows(t *testing.T, s store.Store) {
	retry := newJob("mail.send")
	retry.Tenant, retry.Queue = "acme", "mail"
	last := newJob("report.build")
	last.Queue, last.MaxAttempts = "reports", 1
	twice := newJob("sms.send")
	twice.Queue, twice.MaxAttempts = "sms", 2
	js := insertNew(t, s, at(0), retry, last, twice)
	for _, j := range js {
		claimLease(t, s, j, at(0), at(30*time.Second))
	}
	want := []store.RescuedJob{
		{ID: js[0].ID, Tenant: "acme", Queue: "mail", Kind: "mail.send", Attempt: 1, State: idemtype.StateRetryable},
		{ID: js[1].ID, Tenant: "default", Queue: "reports", Kind: "report.build", Attempt: 1, State: idemtype.StateDead},
		{ID: js[2].ID, Tenant: "default", Queue: "sms", Kind: "sms.send", Attempt: 1, State: idemtype.StateRetryable},
	}
	wantRescued(t, "first rescue", rescueJobs(t, s, at(time.Minute)), want)
	for _, w := range want {
		// What it returned is what it wrote.
		if j := mustGet(t, s, w.ID); j.State != w.State || j.Attempt != w.Attempt || j.Queue != w.Queue || j.Kind != w.Kind {
			t.Errorf("job %d after the rescue: %s attempt %d %s/%s, returned %+v", w.ID, j.State, j.Attempt, j.Queue, j.Kind, w)
		}
	}
	if got := rescueJobs(t, s, at(2*time.Minute)); len(got) != 0 {
		t.Errorf("second rescue returned %+v, want none", got)
	}
	// The job of two attempts runs again and loses its last lease: dead.
	if _, err := s.JobPromote(t.Context(), &store.JobPromoteParams{Now: at(3 * time.Minute)}); err != nil {
		t.Fatalf("JobPromote: %v", err)
	}
	claimLease(t, s, js[2], at(3*time.Minute), at(4*time.Minute))
	wantRescued(t, "rescue of the last attempt", rescueJobs(t, s, at(5*time.Minute)), []store.RescuedJob{
		{ID: js[2].ID, Tenant: "default", Queue: "sms", Kind: "sms.send", Attempt: 2, State: idemtype.StateDead},
	})
}

// rescueJobs runs JobRescue at now and returns the jobs it rescued.
func rescueJobs(t *testing.T, s store.Store, now time.Time) []store.RescuedJob {
	t.Helper()
	got, err := s.JobRescue(t.Context(), &store.JobRescueParams{Now: now, Limit: 100})
	if err != nil {
		t.Fatalf("JobRescue: %v", err)
	}
	return got
}

// wantRescued checks the rows a rescue returned, in any order.
func wantRescued(t *testing.T, what string, got, want []store.RescuedJob) {
	t.Helper()
	byID := func(a, b store.RescuedJob) int { return cmp.Compare(a.ID, b.ID) }
	got, want = slices.Clone(got), slices.Clone(want)
	slices.SortFunc(got, byID)
	slices.SortFunc(want, byID)
	if !slices.Equal(got, want) {
		t.Errorf("%s returned %+v, want (any order) %+v", what, got, want)
	}
}
