package idem_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// finishGate is a store whose job finishes wait until open is closed;
// entered hears of each waiting call. Everything else (heartbeats
// included) is the real store's, as when a finish waits on a row lock or a
// store that answers other statements.
type finishGate struct {
	store.Store
	entered chan struct{}
	open    chan struct{}
}

func (s *finishGate) JobFinishMany(ctx context.Context, ps []*store.JobFinishParams) ([]error, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-s.open:
	case <-ctx.Done():
	}
	return s.Store.JobFinishMany(ctx, ps)
}

// TestStopKeepsTheLeaseOfAFinishItDrains: a graceful Stop waits for the
// completer to write the finishes handed over, and meanwhile those jobs
// keep their leases, as while the client runs. The finish here waits
// longer than a lease; a rescue after that finds nothing to take, and the
// job completes in attempt 1. Before the fix Stop stopped the heartbeater
// before draining the completer: the lease lapsed, the rescuer took the
// job back (a lost attempt, its handler to run again) and the finish was
// refused as lease-lost.
func TestStopKeepsTheLeaseOfAFinishItDrains(t *testing.T) {
	t.Parallel()
	// 2 s: renewals every 667 ms, so a loaded machine's hiccups do not
	// lapse the lease of a live client.
	const lease = 2 * time.Second
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, _ := openLeaseStore(t, kind)
			st := &finishGate{Store: raw, entered: make(chan struct{}, 1), open: make(chan struct{})}
			workers := idem.NewWorkers()
			workers.Handle("drained", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				return json.RawMessage(`"done"`), nil
			})
			c := startShutdownClient(t, st, workers, lease)
			var open sync.Once
			defer open.Do(func() { close(st.open) }) // on failure: let the finish through
			res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "drained"})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-st.entered:
			case <-time.After(leaseTimeout):
				t.Fatal("the finish never reached the store")
			}
			stopAt := time.Now()
			stopped := make(chan error, 1)
			go func() { stopped <- c.Stop(ctx) }()
			defer func() { open.Do(func() { close(st.open) }); <-stopped }()
			// Wait until the lease is renewed after Stop began (it ends
			// later than a lease from then) or has lapsed.
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(leaseTimeout)
			for {
				row, err := raw.JobGet(ctx, &store.JobGetParams{ID: res.Job.ID})
				if err != nil {
					t.Fatal(err)
				}
				if row.State != idem.StateRunning || row.LeaseExpiresAt == nil {
					t.Fatalf("job %s before its finish was written", row.State)
				}
				if row.LeaseExpiresAt.After(stopAt.Add(lease)) || time.Now().After(*row.LeaseExpiresAt) {
					break
				}
				select {
				case <-tick.C:
				case <-deadline:
					t.Fatal("the lease neither lapsed nor was renewed")
				}
			}
			ids, err := raw.JobRescue(ctx, &store.JobRescueParams{Now: time.Now().UTC(), Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			open.Do(func() { close(st.open) })
			if err := <-stopped; err != nil {
				t.Fatalf("stop: %v", err)
			}
			stopped <- nil // for the deferred wait
			row, err := raw.JobGet(ctx, &store.JobGetParams{ID: res.Job.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != 0 || row.State != idem.StateCompleted || row.Attempt != 1 {
				t.Fatalf("rescued %v while Stop drained its finish; the job is %s in attempt %d, want completed in attempt 1",
					ids, row.State, row.Attempt)
			}
		})
	}
}
