package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestCancelBeforeKeyAcquireLeavesKeyFree: a keyed job cancelled after its
// claim but before its key's lease is taken (the claim's batched
// RecordAcquireMany still to come) does not start its handler, and must not
// take its key either: the cancel has settled the key's record, and a lease
// taken afterwards for a job that will never run is held by nobody until it
// ends (a 10-minute lease here), so the next job of that key snoozes behind
// it, and so does anything else that wants the key. The next job of the key
// must run as soon as it is enqueued, its key taken at the first try (no
// snoozed attempt).
func TestCancelBeforeKeyAcquireLeavesKeyFree(t *testing.T) {
	t.Parallel()
	checkCancelBeforeKeyAcquire(t, "cancel-before-acquire", false)
}

// checkCancelBeforeKeyAcquire runs, on each lease store, a worker whose
// keyed job (idempotency key) is cancelled while its claim waits at the key
// step (a keyGate), then enqueues the key's next job and checks that it is
// a new job, completes at its first attempt, and is the only job whose
// handler ran. With remote, the cancel is made by another client on its own
// store handle (another process: no announcement reaches the worker).
func checkCancelBeforeKeyAcquire(t *testing.T, key string, remote bool) {
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
			canceller := c
			if remote {
				other, err := idem.NewClient(second(), &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
				if err != nil {
					t.Fatal(err)
				}
				canceller = other
			}
			var window time.Duration // the key dedups while its job is unfinished only
			first, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "keyed", Opts: &idem.EnqueueOpts{IdempotencyKey: key, DedupWindow: &window}})
			if err != nil {
				t.Fatal(err)
			}
			st.waitEntered(t)
			if _, err := canceller.JobCancel(ctx, "", first.Job.ID); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			release()
			// The producer claims again only once this claim's keys were
			// taken: the next job's claim comes after the cancelled job's
			// RecordAcquireMany.
			next, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "keyed", Args: json.RawMessage(`{"n":2}`),
				Opts: &idem.EnqueueOpts{IdempotencyKey: key, DedupWindow: &window}})
			if err != nil {
				t.Fatal(err)
			}
			if next.Existing {
				t.Fatalf("enqueue after the cancel returned job %d again", next.Job.ID)
			}
			wctx, cancel := context.WithTimeout(ctx, leaseTimeout)
			defer cancel()
			row, err := c.JobWait(wctx, next.Job.ID)
			if err != nil {
				as, _ := c.JobAttempts(ctx, "", next.Job.ID)
				got, _ := c.JobGet(ctx, "", next.Job.ID)
				t.Fatalf("the next job of the key did not finish (%v): %+v, attempts %+v", err, got, as)
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
