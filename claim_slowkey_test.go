package idem_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// stalledKeyStep is a real store whose claims leave the key step to the
// producer (KeyHeld cleared, as for a key the claim could not take) and
// whose first batched key acquire does not answer until the claim's
// bound (its context, one lease) ends: a key step as slow as a lease.
type stalledKeyStep struct {
	store.Store
	stalled atomic.Bool
}

func (s *stalledKeyStep) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	jobs, err := s.Store.JobClaim(ctx, p)
	for _, j := range jobs {
		j.KeyHeld = false
	}
	return jobs, err
}

func (s *stalledKeyStep) RecordAcquireMany(ctx context.Context, ps []*store.RecordAcquireParams) ([]*store.RecordAcquireResult, error) {
	if s.stalled.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return s.Store.RecordAcquireMany(ctx, ps)
}

// TestKeyStepAsSlowAsTheLeaseStillRuns: the batched key step of a claim
// takes the whole lease (the claim's bound cuts it off); meanwhile the
// heartbeater keeps the job's lease alive, and the job's key is then
// taken on its own before its handler. The job must run at its first
// attempt. Before the fix the short-lease renewal that follows the key
// step ran on the claim's context, already over: it failed, took the
// claim's (long renewed) lease end for over and cancelled the job, whose
// handler never started and whose finish was dropped; the job stayed
// running, owned by nobody, until a rescue (none here).
func TestKeyStepAsSlowAsTheLeaseStillRuns(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, _ := openLeaseStore(t, kind)
			st := &stalledKeyStep{Store: raw}
			var runs atomic.Int32
			workers := idem.NewWorkers()
			workers.Handle("keyed", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				runs.Add(1)
				return json.RawMessage(`"ok"`), nil
			})
			c := startShutdownClient(t, st, workers, 2*time.Second)
			t.Cleanup(func() { _ = c.Stop(ctx) })
			res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "keyed", Opts: &idem.EnqueueOpts{IdempotencyKey: "slow-key-step"}})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, leaseTimeout)
			defer cancel()
			row, err := c.JobWait(wctx, res.Job.ID)
			if err != nil {
				got, _ := c.JobGet(ctx, "", res.Job.ID)
				t.Fatalf("the job never finished (%v): %s at attempt %d, its handler ran %d times", err, got.State, got.Attempt, runs.Load())
			}
			if row.State != idem.StateCompleted || row.Attempt != 1 || runs.Load() != 1 {
				t.Fatalf("job %s at attempt %d, handler ran %d times; want completed at attempt 1, run once", row.State, row.Attempt, runs.Load())
			}
		})
	}
}
