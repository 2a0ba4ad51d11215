package recordlease

import (
	"context"
	"testing"
	"time"
)

// TestHoldRenewsWithinTheLease: Hold's first renewal comes within the lease
// in real time (every third of it), not after the lease has lapsed. The
// lease here is 6 s, so the renewal is due after 2 s and the test allows
// the whole 6 s for scheduling delays. (Kills `Lease / 3` → `Lease * 3` for
// the renewal ticker, which renewed only after three leases; the other
// tests drive a fake clock, so the renewal period in real time was unseen.)
func TestHoldRenewsWithinTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openSQLite(t)
	p := params("a", &fakeClock{t: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)})
	p.Lease = 6 * time.Second
	renewed := make(chan error, 1)
	p.renewed = renewed
	l, _, err := Acquire(ctx, st, p)
	if err != nil || l == nil {
		t.Fatalf("acquire: %v %v", l, err)
	}
	stop := l.Hold(ctx, nil)
	defer stop()
	select {
	case err := <-renewed:
		if err != nil {
			t.Fatalf("renewal: %v", err)
		}
	case <-time.After(p.Lease):
		t.Fatalf("no renewal within the %v lease", p.Lease)
	}
}
