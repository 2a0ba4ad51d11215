package producer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/store"
)

// TestRunningForgetsVoidedClaims: the claims CancelVoided remembers
// because they were not registered here (most often claims of another
// process, which never will be) are forgotten once their keep ran out, so
// a process that cancels many jobs running elsewhere does not grow
// without bound.
func TestRunningForgetsVoidedClaims(t *testing.T) {
	t.Parallel()
	r := producer.NewRunning()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keep := time.Minute
	cause := errors.New("job cancelled")
	for i := range 100 {
		r.CancelVoided(store.Lease{ID: int64(i + 1), Token: "elsewhere"}, base, keep, cause)
	}
	if n := r.Voided(); n != 100 {
		t.Fatalf("remembers %d claims, want 100 within their keep", n)
	}
	r.CancelVoided(store.Lease{ID: 1000, Token: "later"}, base.Add(2*keep), keep, cause)
	if n := r.Voided(); n != 1 {
		t.Fatalf("remembers %d claims two keeps later, want only the newest", n)
	}
}

// TestCancelVoidedSparesALaterRun: the notice that an older claim of a job
// was voided (its cancel, heard late: the job since retried and claimed
// again here under a new token) neither cancels the run of the later claim
// nor marks it lost; the notice for the run's own token does.
func TestCancelVoidedSparesALaterRun(t *testing.T) {
	t.Parallel()
	r := producer.NewRunning()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	producer.AddRunning(r, &idemtype.JobRow{ID: 7, LeaseToken: "second"}, cancel)
	r.CancelVoided(store.Lease{ID: 7, Token: "first"}, now, time.Minute, errors.New("job cancelled"))
	if err := context.Cause(ctx); err != nil {
		t.Fatalf("the voided first claim cancelled the second run: %v", err)
	}
	if got := r.Leases(); len(got) != 1 || got[0].Token != "second" {
		t.Fatalf("leases renewed after the old notice: %v, want the second run's", got)
	}
	r.CancelVoided(store.Lease{ID: 7, Token: "second"}, now, time.Minute, errors.New("job cancelled"))
	if context.Cause(ctx) == nil {
		t.Fatal("the notice for the run's own claim did not cancel it")
	}
}
