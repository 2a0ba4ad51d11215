package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestRateLoweredThreeProcesses: the three worker processes of
// TestRateLimitThreeProcesses run acme's jobs under its rate of 5 per
// minute; once 5 have run in the first window, the test lowers the rate to
// 2 per minute and moves every clock on a window each time it has seen 2
// more runs. Every window after the first starts at most 2 of acme's jobs,
// and the first at most 5 + 2: 5 before the change and 2 after it (a
// changed rate starts its window again, docs/flow-control.md; the
// processes' clocks may still be in the first window when they read the
// new rate).
func TestRateLoweredThreeProcesses(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres", "postgres-reserved"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			const jobs, procs, lowered = 15, 3, 2
			ctx := context.Background()
			st, env := openRateBackend(t, backend)
			now := time.Date(2031, 1, 1, 0, 0, 1, 0, time.UTC)
			clock := &fakeClock{now: now}
			c, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: quietLogger(), Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 4*jobs)
			ps := startRateProcs(t, env, procs, lines, now)
			deadline := time.After(waitTimeout)
			ids := enqueueTenant(t, c, "acme", jobs)
			seen := map[int64]int{}
			var changedAt time.Time // the clocks' time of the lowering, in the first window
			next := rateLimit.Rate
			for len(seen) < jobs {
				select {
				case l := <-lines:
					seen[ranJob(t, l)]++
					if len(seen) < next || len(seen) == jobs {
						continue
					}
					if changedAt.IsZero() {
						// The first window is spent: lower the rate there.
						clock.mu.Lock()
						clock.now = now.Add(time.Second)
						clock.mu.Unlock()
						for _, p := range ps {
							p.setTime(t, now.Add(time.Second))
						}
						if _, err := c.LimitPut(ctx, idem.Limit{FlowScope: rateLimit.FlowScope, Rate: lowered, Period: time.Minute}); err != nil {
							t.Fatal(err)
						}
						changedAt = now.Add(time.Second)
					}
					now = now.Add(time.Minute)
					clock.mu.Lock()
					clock.now = now
					clock.mu.Unlock()
					for _, p := range ps {
						p.setTime(t, now)
					}
					next = len(seen) + lowered
				case <-deadline:
					t.Fatalf("%d of %d jobs ran", len(seen), jobs)
				}
			}
			rows := waitAll(t, c, ids, waitTimeout)
			perWindow := map[time.Time]int{}
			for _, r := range rows {
				perWindow[r.StartedAt.Truncate(time.Minute)]++
			}
			first := changedAt.Truncate(time.Minute)
			for w, n := range perWindow {
				switch {
				case w.Equal(first) && n > rateLimit.Rate+lowered:
					t.Errorf("first window: %d started, rate %d then %d", n, rateLimit.Rate, lowered)
				case !w.Equal(first) && n > lowered:
					t.Errorf("window %v started %d jobs, lowered rate %d", w, n, lowered)
				}
			}
			t.Logf("%s: %d windows, starts per window %v", backend, len(perWindow), perWindow)
			for id, n := range seen {
				if n != 1 {
					t.Errorf("job %d ran %d times", id, n)
				}
			}
		})
	}
}
