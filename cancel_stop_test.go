package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestCancelFromAnotherClientDuringStop (PostgreSQL): Stop(ctx) lets the
// running handlers finish until ctx ends; a job cancelled meanwhile by
// another process must still have its handler cancelled at once
// (ErrJobCancelled, as JobCancel documents for PostgreSQL), not at the next
// heartbeat minutes later. Before the fix Stop stopped the notifier (its
// LISTEN) right after the producers, before waiting for the handlers, so
// such a cancel reached the handler only through a heartbeat (a third of
// the 10-minute lease here, far past the wait below).
func TestCancelFromAnotherClientDuringStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, second := openLeaseStore(t, "postgres")
	started := make(chan int64, 1)
	stopped := make(chan error, 1)
	workers := idem.NewWorkers()
	workers.Handle("long", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		started <- j.ID
		<-ctx.Done() // a handler that heeds its context
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	worker, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(),
		LeaseDuration: 10 * time.Minute, PollInterval: time.Hour, DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	job, err := worker.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "long"})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := idem.NewClient(second(), &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	select {
	case <-started:
	case <-wait.Done():
		t.Fatal("the job never started")
	}
	waitListening(t, st.(*pgstore.Store).Schema(), 1)
	// A graceful stop that would wait for the handler well past the wait.
	stopCtx, stopCancel := context.WithTimeout(ctx, 4*leaseTimeout)
	defer stopCancel()
	stopDone := make(chan error, 1)
	go func() { stopDone <- worker.Stop(stopCtx) }()
	select {
	case <-idem.ProducersStopped(worker):
	case <-wait.Done():
		t.Fatal("the producers never stopped")
	}
	if _, err := other.JobCancel(ctx, "", job.Job.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	select {
	case cause := <-stopped:
		if !errors.Is(cause, idem.ErrJobCancelled) {
			t.Fatalf("the handler's context ended with %v, want ErrJobCancelled", cause)
		}
	case <-wait.Done():
		t.Fatal("the handler still runs 30s after another client cancelled it during Stop (the heartbeat that would tell it is minutes away)")
	}
	select {
	case err := <-stopDone:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-wait.Done():
		t.Fatal("Stop did not return once the handler did")
	}
}
