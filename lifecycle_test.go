package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

func TestClientLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("stop without start, stop twice, start twice", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &idem.Config{Queues: queues(1), DisableMaintenance: true})
		if err := b.client.Stop(ctx); err != nil {
			t.Fatalf("stop before start: %v", err)
		}
		c := setup(t, &idem.Config{Queues: queues(1), DisableMaintenance: true})
		c.start(t)
		if err := c.client.Start(ctx); err == nil {
			t.Fatal("a second Start succeeded")
		}
		if err := c.client.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.client.Stop(ctx); err != nil {
			t.Fatalf("second stop: %v", err)
		}
	})

	t.Run("an insert-only client without workers starts and stops", func(t *testing.T) {
		t.Parallel()
		st := testStore(t)
		client, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()}) // Workers nil, no queues
		if err != nil {
			t.Fatal(err)
		}
		(&bundle{client: client}).start(t)
		if _, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an enqueue wakes the queue at once", func(t *testing.T) {
		t.Parallel()
		// The poll interval is an hour: only the local wake-up can start the job.
		b := setup(t, &idem.Config{Queues: queues(1), PollInterval: time.Hour, DisableMaintenance: true})
		b.workers.Handle("k", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
		b.start(t)
		r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, b, r.Job.ID, idem.StateCompleted)
	})

	t.Run("a promoted job wakes its queue", func(t *testing.T) {
		t.Parallel()
		clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
		b := setup(t, &idem.Config{Queues: queues(1), PollInterval: time.Hour, Now: clock.Now,
			LeaderTTL: 30 * time.Millisecond})
		b.workers.Handle("k", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
		r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k",
			Opts: &idem.EnqueueOpts{RunAt: clock.Now().Add(time.Minute)}})
		if err != nil {
			t.Fatal(err)
		}
		b.start(t)
		clock.Add(2 * time.Minute) // the promoter (every second, on the leader) makes it available
		waitState(t, b, r.Job.ID, idem.StateCompleted)
	})
}
