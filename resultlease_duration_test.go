package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestResultLeaseCompleteKeepsTheGivenDuration: the duration a caller
// gives ResultLeaseComplete is the one stored and served to the next
// caller. It was read back as the time from (now - duration) to a now cut
// to microseconds, so a clock with nanoseconds below the microsecond
// stored 849 ms for 850 (idemhttp's seeds test caught it now and then).
func TestResultLeaseCompleteKeepsTheGivenDuration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2031, 1, 1, 0, 0, 0, 500, time.UTC) // 500 ns past a microsecond
	b := setup(t, &idem.Config{Now: func() time.Time { return at }})
	l, err := b.client.ResultLeaseAcquire(ctx, "dur:k", nil)
	if err != nil || l.Token == "" {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	done, err := b.client.ResultLeaseComplete(ctx, "", "dur:k", l.Token, []byte(`1`), 0, 850*time.Millisecond)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	if done.Duration != 850*time.Millisecond {
		t.Errorf("complete answered duration %v, want 850ms", done.Duration)
	}
	again, err := b.client.ResultLeaseAcquire(ctx, "dur:k", nil)
	if err != nil || again.Cached == nil {
		t.Fatalf("acquire after complete: %+v %v", again, err)
	}
	if again.Cached.Duration != 850*time.Millisecond {
		t.Errorf("cached answer duration %v, want 850ms", again.Cached.Duration)
	}
}
