package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestCancelFromAnotherClientStopsHandlerAtOnce (PostgreSQL): the running
// head of a FIFO partition is cancelled by another started client on its
// own store handle (another process, as far as the runtime is concerned). The store
// announces the cancel (LISTEN/NOTIFY), so the worker's handler is
// cancelled at once — by the cancel, not by a lost heartbeat — and the
// partition's next job, which the same worker claims when the head's slot
// frees (its poll is an hour away), starts only after the head's handler
// returned. The lease is 10 minutes: the next heartbeat, which was the only
// way the cancel reached the handler before the fix, comes 3m20s after the
// claim, far past the wait below.
func TestCancelFromAnotherClientStopsHandlerAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, second := openLeaseStore(t, "postgres")
	started := make(chan int64, 1)
	stopped := make(chan error, 1)
	var headReturned atomic.Bool
	nextSaw := make(chan bool, 1) // whether the head's handler had returned when the next job started
	workers := idem.NewWorkers()
	workers.Handle("head", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		defer headReturned.Store(true)
		started <- j.ID
		<-ctx.Done() // a handler that heeds its context
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	workers.Handle("next", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		nextSaw <- headReturned.Load()
		return json.RawMessage(`"ok"`), nil
	})
	worker, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(2), Logger: quietLogger(),
		LeaseDuration: 10 * time.Minute, PollInterval: time.Hour, DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	head, err := worker.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "head", Opts: &idem.EnqueueOpts{PartitionKey: "order-1"}})
	if err != nil {
		t.Fatal(err)
	}
	next, err := worker.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "next", Opts: &idem.EnqueueOpts{PartitionKey: "order-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = worker.Stop(sctx)
	})
	// Another runtime on its own store handle, working another queue: its
	// cancel reaches the worker's handler only through the store.
	otherWorkers := idem.NewWorkers()
	otherWorkers.Handle("elsewhere", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
	other, err := idem.NewClient(second(), &idem.Config{Workers: otherWorkers, Logger: quietLogger(),
		Queues: map[string]idem.QueueConfig{"elsewhere": {MaxWorkers: 1}}, DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(ctx) })
	wait, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	select {
	case id := <-started:
		if id != head.Job.ID {
			t.Fatalf("started job %d, want the head %d", id, head.Job.ID)
		}
	case <-wait.Done():
		t.Fatal("the head never started")
	}
	waitListening(t, st.(*pgstore.Store).Schema(), 2)
	if _, err := other.JobCancel(ctx, "", head.Job.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	select {
	case cause := <-stopped:
		if !errors.Is(cause, idem.ErrJobCancelled) {
			t.Fatalf("the handler's context ended with %v, want ErrJobCancelled (not a lost heartbeat)", cause)
		}
	case <-wait.Done():
		t.Fatal("the head's handler still runs 30s after another client cancelled it (the heartbeat that would tell it is minutes away)")
	}
	select {
	case returned := <-nextSaw:
		if !returned {
			t.Fatal("the partition's next job started while the cancelled head's handler still ran")
		}
	case <-wait.Done():
		t.Fatal("the partition's next job never started")
	}
	row, err := worker.JobWait(wait, next.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idem.StateCompleted {
		t.Fatalf("next job %s, want completed", row.State)
	}
}

// waitListening waits until n clients listen on schema's channel (the
// notifier's LISTEN connection is made in the background after Start): a
// cancel committed before that is announced to nobody.
func waitListening(t *testing.T, schema string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	dbtest.Until(t, conn, true, nil, fmt.Sprintf("fewer than %d clients listen on the schema's channel", n),
		`SELECT count(*) >= $2 FROM pg_stat_activity WHERE query = $1`, `LISTEN "`+schema+`"`, n)
}
