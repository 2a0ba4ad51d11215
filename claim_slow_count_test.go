package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestSlowClaimGivenBackCountedOnce: a keyed job whose claim came back
// after its lease ended is given back before its handler starts (its
// attempt not counted) and runs on the next claim. The observer (and so
// /metrics: idem_jobs_claimed_total, idem_cache_misses_total) must see the
// one claim that handed the job to its handler and the one cache miss of
// the one run, as a pull claim given back is not counted. Before the fix
// the given-back claim was reported too, and its handler-less attempt
// counted a cache miss: two claims and two misses for one run.
func TestSlowClaimGivenBackCountedOnce(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, _ := openLeaseStore(t, kind)
			obs := newEventCounts()
			workers := idem.NewWorkers()
			workers.Handle("late", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				return json.RawMessage(`"ok"`), nil
			})
			// The answer arrives after the lease ended.
			c, id := runSlowClaim(t, raw, &fakeClock{now: time.Now().UTC()}, workers, obs, lease, lease+time.Second,
				idem.EnqueueParams{Kind: "late", Opts: &idem.EnqueueOpts{IdempotencyKey: "slow-claim-count"}})
			waitCompletedFirstAttempt(t, c, id)
			// JobWait may see the committed finish by polling a moment
			// before the completer's written callback tells the observer:
			// Stop waits for every finish to be answered.
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			if err := c.Stop(sctx); err != nil {
				t.Fatal(err)
			}
			n, outcomes := obs.of(id)
			if n[idem.EventClaimed] != 1 || n[idem.EventCacheMiss] != 1 || n[idem.EventFinished] != 1 {
				t.Fatalf("observed %v (finishes %v), want one claim, one cache miss and one finish for one run", n, outcomes)
			}
		})
	}
}
