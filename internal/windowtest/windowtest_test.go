package windowtest_test

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/windowtest"
	"github.com/idem-dev/idem/store"
)

// TestPeriodLeavesRoom: at every second of two hours the chosen period's
// window (as the store computes it) has the room asked for, and is an hour
// when the hour has that room.
func TestPeriodLeavesRoom(t *testing.T) {
	start := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	for s := 0; s < 7200; s++ {
		now := start.Add(time.Duration(s) * time.Second)
		p := windowtest.Period(now, time.Hour, 5*time.Minute)
		end := windowtest.End(now, p)
		if ws := (&store.Limit{Period: p}).WindowAt(now); !ws.Add(p).Equal(end) {
			t.Fatalf("at %v: End %v, the store's window ends %v", now, end, ws.Add(p))
		}
		if end.Sub(now) < 5*time.Minute {
			t.Fatalf("at %v: period %v leaves %v", now, p, end.Sub(now))
		}
		if now.Minute() < 55 && p != time.Hour {
			t.Fatalf("at %v: period %v, want an hour", now, p)
		}
	}
}
