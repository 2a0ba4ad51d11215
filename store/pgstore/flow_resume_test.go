package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestQueueResumeNotifiesOtherStores: resuming a queue announces it on the
// schema's channel, as an insert does, so that the producers of other
// processes, waiting for a notification, claim its jobs at once rather
// than at their next poll.
func TestQueueResumeNotifiesOtherStores(t *testing.T) {
	t.Parallel()
	ss := openStores(t, 2, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scope := store.FlowScope{Queue: "q"}
	if err := ss[0].QueuePause(ctx, &store.QueuePauseParams{Scope: scope}); err != nil {
		t.Fatal(err)
	}
	ch, err := ss[1].Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss[0].QueueResume(ctx, &store.QueuePauseParams{Scope: scope}); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case q := <-ch:
			if q == "q" {
				return
			}
		case <-deadline.C:
			t.Fatal("no notification of queue q after its resume")
		}
	}
}
