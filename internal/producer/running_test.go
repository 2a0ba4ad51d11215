package producer_test

import (
	"errors"
	"testing"
	"time"

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
