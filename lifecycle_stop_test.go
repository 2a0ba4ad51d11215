package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestStartAfterStopIsRefused: a client stopped before it was started
// must not start afterwards. Before, Start ran the runtime and every later
// Stop found the client stopped already and returned at once, leaving the
// producers claiming and the handlers running with nothing to stop them.
func TestStartAfterStopIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &idem.Config{Queues: queues(1), DisableMaintenance: true})
	if err := b.client.Stop(ctx); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	if err := b.client.Start(ctx); err == nil {
		t.Fatal("Start after Stop succeeded: the runtime runs and no Stop will stop it")
	}
	if err := b.client.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

// TestConcurrentStopWaitsForTheStopUnderWay: a Stop called while another
// runs returns only once the client has stopped (its handlers returned),
// or with its context's error. Before, it returned nil at once, so a
// caller (a deferred Stop beside a signal handler's) went on while
// handlers still ran.
func TestConcurrentStopWaitsForTheStopUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &idem.Config{Queues: queues(1), DisableMaintenance: true})
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failed test does not leave the handler and its Stop blocked
	var returned atomic.Bool
	b.workers.Handle("k", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		close(started)
		<-release
		returned.Store(true)
		return nil, nil
	})
	if err := b.client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("handler did not start")
	}
	first := make(chan error, 1)
	go func() { first <- b.client.Stop(ctx) }() // waits for the handler: no deadline
	select {
	case <-idem.ProducersStopped(b.client): // the first Stop is under way
	case <-time.After(waitTimeout):
		t.Fatal("producers did not stop")
	}

	// Bounded by its context, a second Stop gives up with its error.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := b.client.Stop(short)
	cancel()
	if returned.Load() {
		t.Fatal("the handler returned before it was released")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Stop while the first runs returned %v, want the context's error", err)
	}

	// Unbounded, it returns once the client has stopped.
	third := make(chan bool, 1) // whether the handler had returned
	go func() {
		if err := b.client.Stop(ctx); err != nil {
			t.Errorf("third Stop: %v", err)
		}
		third <- returned.Load()
	}()
	free()
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("first Stop: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("first Stop did not return")
	}
	select {
	case done := <-third:
		if !done {
			t.Fatal("a Stop returned while the handler still ran")
		}
	case <-time.After(waitTimeout):
		t.Fatal("third Stop did not return")
	}
}
