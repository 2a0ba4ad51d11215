package idem_test

import (
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestTimeoutZeroFallsThrough (both stores): a TimeoutByKind or
// TimeoutByQueue entry of 0 is no entry, as docs/schedules.md says ("the
// job's own, else TimeoutByKind, else TimeoutByQueue, else Timeout; 0
// everywhere = no limit"), like a job's own 0 and ResultTTLByKind's 0: the
// next level decides. It used to turn the timeout off for that kind or
// queue. The pull lease shows the timeout: it ends at it.
func TestTimeoutZeroFallsThrough(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			c, clock := timeoutClient(t, sk, &idem.Config{Timeout: 30 * time.Second,
				TimeoutByKind:  map[string]time.Duration{"k": 0, "q0": 0},
				TimeoutByQueue: map[string]time.Duration{idem.DefaultQueue: 10 * time.Second, "zero": 0}})
			ctx := t.Context()
			for _, tc := range []struct {
				kind, queue string
				want        time.Duration
			}{
				{"k", idem.DefaultQueue, 10 * time.Second}, // kind 0: the queue's
				{"q0", "zero", 30 * time.Second},           // kind 0, queue 0: Timeout
			} {
				r, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: tc.kind, Opts: &idem.EnqueueOpts{Queue: tc.queue}})
				if err != nil {
					t.Fatal(err)
				}
				jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{tc.queue}, WorkerID: "w", Limit: 1, Lease: time.Minute})
				if err != nil || len(jobs) != 1 || jobs[0].ID != r.Job.ID {
					t.Fatalf("claim %s: %v %v", tc.kind, jobs, err)
				}
				if want := clock.Now().Add(tc.want); !jobs[0].LeaseExpiresAt.Equal(want) {
					t.Errorf("kind %s in queue %s: lease to %v, want %v (a timeout of %v)", tc.kind, tc.queue,
						jobs[0].LeaseExpiresAt, want, tc.want)
				}
			}
		})
	}
}
