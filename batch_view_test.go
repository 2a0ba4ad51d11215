package idem_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestBatchViewHeldChildNotFinished: a child cancelled while its handler
// runs is cancelled at once, but the batch is not finished until the
// handler has returned — exactly when its completion job is released — so
// the batch's view and its completion agree.
func TestBatchViewHeldChildNotFinished(t *testing.T) {
	t.Parallel()
	b := setup(t, &idem.Config{Queues: map[string]idem.QueueConfig{"default": {MaxWorkers: 2}}})
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	b.workers.Handle("upload", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		close(started)
		<-release // winds down slowly: ignores its cancelled context
		return nil, nil
	})
	b.workers.Handle("report", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
	bt, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "held-1", Jobs: uploadJobs("a.csv"),
		OnFinish: &idem.EnqueueParams{Kind: "report"}})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the child's handler never started")
	}
	cancelled, err := b.client.BatchCancel(ctx, "", bt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Counts[idem.StateCancelled] != 1 || cancelled.Finished || cancelled.Held != 1 {
		t.Fatalf("after the cancel, handler still running: counts %v finished %v held %d; want cancelled 1, not finished, held 1",
			cancelled.Counts, cancelled.Finished, cancelled.Held)
	}
	if cancelled.OnFinish == nil || cancelled.OnFinish.State != idem.StatePending {
		t.Fatalf("completion job %+v, want pending while the handler runs", cancelled.OnFinish)
	}
	close(release)
	released = true
	waitState(t, b, bt.OnFinish.ID, idem.StateCompleted)
	got, err := b.client.BatchGet(ctx, "", bt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Finished || got.Held != 0 || got.Counts[idem.StateCancelled] != 1 {
		t.Fatalf("after the handler returned: counts %v finished %v held %d", got.Counts, got.Finished, got.Held)
	}
}

// TestBatchViewExistingItemNotWaitedFor: an item whose derived key dedups
// onto a job made before the batch (here another batch's: batch "a" with
// job key "b/c" and batch "a/b" with job key "c" both derive "a/b/c") gets
// that job, which stays in its batch: this batch neither lists it nor
// makes its completion job wait for it.
func TestBatchViewExistingItemNotWaitedFor(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	first, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "a",
		Jobs: []idem.EnqueueParams{{Kind: "upload", Opts: &idem.EnqueueOpts{IdempotencyKey: "b/c"}}}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "a/b",
		Jobs: []idem.EnqueueParams{{Kind: "upload", Opts: &idem.EnqueueOpts{IdempotencyKey: "c"}},
			{Kind: "upload", Opts: &idem.EnqueueOpts{IdempotencyKey: "own"}}},
		OnFinish: &idem.EnqueueParams{Kind: "report"}})
	if err != nil {
		t.Fatal(err)
	}
	if second.Total != 1 || second.Jobs[0].IdempotencyKey != "a/b/own" || second.Jobs[0].ID == first.Jobs[0].ID {
		t.Fatalf("second batch lists %d jobs (%+v), want only its own a/b/own", second.Total, second.Jobs)
	}
	if second.OnFinish == nil || !slices.Equal(second.OnFinish.DependsOn, []int64{second.Jobs[0].ID}) {
		t.Fatalf("completion job waits for %v, want exactly the batch's jobs [%d]", second.OnFinish.DependsOn, second.Jobs[0].ID)
	}
}
