package idem_test

import (
	"context"
	"encoding/json"
	"sync"
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
			st := &claimGate{Store: raw, claimed: make(chan []*idem.JobRow, 2), open: make(chan struct{})}
			var open sync.Once
			release := func() { open.Do(func() { close(st.open) }) }
			defer release()
			clock := &fakeClock{now: time.Now().UTC()}
			obs := newEventCounts()
			workers := idem.NewWorkers()
			workers.Handle("late", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				return json.RawMessage(`"ok"`), nil
			})
			c, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(), Observer: obs,
				LeaseDuration: lease, PollInterval: 20 * time.Millisecond, DisableMaintenance: true, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "late", Opts: &idem.EnqueueOpts{IdempotencyKey: "slow-claim-count"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Stop(ctx) })
			select {
			case <-st.claimed:
			case <-time.After(leaseTimeout):
				t.Fatal("the job was never claimed")
			}
			clock.Add(lease + time.Second) // the answer arrives after the lease ended
			release()
			wctx, cancel := context.WithTimeout(ctx, leaseTimeout)
			defer cancel()
			row, err := c.JobWait(wctx, res.Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if row.State != idem.StateCompleted || row.Attempt != 1 {
				t.Fatalf("job %s at attempt %d, want completed at attempt 1", row.State, row.Attempt)
			}
			// JobWait may see the committed finish by polling a moment
			// before the completer's written callback tells the observer:
			// Stop waits for every finish to be answered.
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			if err := c.Stop(sctx); err != nil {
				t.Fatal(err)
			}
			n, outcomes := obs.of(res.Job.ID)
			if n[idem.EventClaimed] != 1 || n[idem.EventCacheMiss] != 1 || n[idem.EventFinished] != 1 {
				t.Fatalf("observed %v (finishes %v), want one claim, one cache miss and one finish for one run", n, outcomes)
			}
		})
	}
}
