package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestRemoteCancelBeforeKeyAcquireLeavesKeyFree: as
// TestCancelBeforeKeyAcquireLeavesKeyFree, with the cancel made by another
// process (a client on its own store handle). On SQLite no announcement
// reaches the worker (nor here on PostgreSQL: the worker's store wrapper is
// no Listener), so only the store tells it: the claim's leases are
// checked after its key step, and a job cancelled before that step does
// not start and gives its key back. Before the fix the worker ran the
// cancelled job's handler, and the key lease its key step took after the
// cancel was held by nobody until it ended (10 minutes here): the key's
// next job snoozed behind it.
func TestRemoteCancelBeforeKeyAcquireLeavesKeyFree(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, second := openLeaseStore(t, kind)
			st, release := newKeyGate(raw)
			defer release() // on failure: let the acquire through
			ran := make(chan int64, 2)
			workers := idem.NewWorkers()
			workers.Handle("keyed", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
				ran <- j.ID
				return json.RawMessage(`"sent"`), nil
			})
			c := startShutdownClient(t, st, workers, 10*time.Minute)
			t.Cleanup(func() { _ = c.Stop(ctx) })
			other, err := idem.NewClient(second(), &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			const key = "remote-cancel-before-acquire"
			var window time.Duration
			first, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "keyed", Opts: &idem.EnqueueOpts{IdempotencyKey: key, DedupWindow: &window}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-st.entered:
			case <-time.After(leaseTimeout):
				t.Fatal("the claimed job never took its key")
			}
			if _, err := other.JobCancel(ctx, "", first.Job.ID); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			release()
			next, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "keyed", Args: json.RawMessage(`{"n":2}`),
				Opts: &idem.EnqueueOpts{IdempotencyKey: key, DedupWindow: &window}})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, leaseTimeout)
			defer cancel()
			row, err := c.JobWait(wctx, next.Job.ID)
			if err != nil {
				got, _ := c.JobGet(ctx, "", next.Job.ID)
				t.Fatalf("the next job of the key did not finish (%v): %s, %s", err, got.State, got.LastError)
			}
			as, err := c.JobAttempts(ctx, "", next.Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if row.State != idem.StateCompleted || len(as) != 1 {
				t.Fatalf("next job of the key %s after %d attempts, want completed at the first (%+v)", row.State, len(as), as)
			}
			select {
			case id := <-ran:
				if id != next.Job.ID {
					t.Fatalf("handler ran job %d (cancelled before it started), want only %d", id, next.Job.ID)
				}
			default:
				t.Fatal("the next job completed without its handler")
			}
		})
	}
}
