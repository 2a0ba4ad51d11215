package idem_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestCancelledPartitionHeadHoldsUntilHandlerReturns: a FIFO partition
// holds jobs A and B; A's handler runs and is cancelled by another process
// but keeps winding down (it ignores its context until released). No claim
// — of any process — may take B while A's handler runs: B starts only
// after A's handler returned (its worker acknowledges the cancel with its
// refused finish). Before the fix the cancel's commit released the
// partition and a claim made right after it took B beside A's handler.
// On PostgreSQL the cancel reaches the handler by NOTIFY (cause
// ErrJobCancelled), on SQLite by the refused heartbeat (ErrLeaseLost).
func TestCancelledPartitionHeadHoldsUntilHandlerReturns(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testCancelledHeadHolds(t, kind)
		})
	}
}

// TestCancelledJobHoldsItsSlotUntilHandlerReturns: the same with jobs of
// no partition under a queue concurrency of 1: B, held back by the limit,
// starts only after A's handler returned, and then at once (the worker's
// refused finish ends A's hold; maintenance is off, so no rescuer would).
// Before, the worker acknowledged the cancels of partitioned jobs only, and
// B waited for A's lease to end and the rescuer.
func TestCancelledJobHoldsItsSlotUntilHandlerReturns(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testCancelledHolds(t, kind, "")
		})
	}
}

func testCancelledHeadHolds(t *testing.T, kind string) { testCancelledHolds(t, kind, "entity") }

// testCancelledHolds runs A and B of partition part (none: "", under a
// queue concurrency of 1) as TestCancelledPartitionHeadHoldsUntilHandlerReturns says.
func testCancelledHolds(t *testing.T, kind, part string) {
	ctx := context.Background()
	st, second := openLeaseStore(t, kind)
	aStopped := make(chan struct{})
	release := make(chan struct{})
	bStarted := make(chan bool, 1) // whether A's handler had returned
	var aReturned atomic.Bool
	started := make(chan struct{})
	workers := idem.NewWorkers()
	workers.Handle("a", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		close(aStopped)
		<-release // winding down after the cancel, past the next claims
		aReturned.Store(true)
		return nil, nil
	})
	workers.Handle("b", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		bStarted <- aReturned.Load()
		return nil, nil
	})
	worker, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(2), Logger: quietLogger(),
		LeaseDuration: time.Second, PollInterval: 20 * time.Millisecond, DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if part == "" {
		if _, err := worker.LimitPut(ctx, idem.Limit{FlowScope: store.FlowScope{Queue: idem.DefaultQueue}, Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := worker.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "a", Opts: &idem.EnqueueOpts{PartitionKey: part}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worker.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "b", Opts: &idem.EnqueueOpts{PartitionKey: part}}); err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		_ = worker.Stop(ctx)
	})
	wait, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	select {
	case <-started:
	case <-wait.Done():
		t.Fatal("A never started")
	}
	if kind == "postgres" {
		waitListening(t, st.(*pgstore.Store).Schema(), 1)
	}
	other := second()
	if _, err := other.JobCancel(ctx, &store.JobCancelParams{ID: a.Job.ID, Reason: "test", Now: time.Now()}); err != nil {
		t.Fatalf("cancel A: %v", err)
	}
	select {
	case <-aStopped:
	case <-wait.Done():
		t.Fatal("A's handler was never told of its cancel")
	}
	// Another process claims the queue while A's handler winds down.
	now := time.Now()
	got, err := other.JobClaim(ctx, &store.JobClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "other",
		Limit: 10, LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("another process claimed job %d (partition %q) while the cancelled job's handler still ran", got[0].ID, part)
	}
	close(release)
	select {
	case returned := <-bStarted:
		if !returned {
			t.Fatal("B started while A's handler still ran")
		}
	case <-wait.Done():
		t.Fatal("B never started after A's handler returned")
	}
}
