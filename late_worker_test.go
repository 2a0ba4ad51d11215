package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestWorkersRegisteredAfterStartAreClaimed (both stores): a worker
// registered after Client.Start is worked: a job of its kind enqueued
// before the registration (found by the next poll) and jobs of kinds
// registered concurrently with the producer's claims, each enqueued after
// its registration. The producer's kind list was fixed at Start, so such
// jobs stayed available forever.
func TestWorkersRegisteredAfterStartAreClaimed(t *testing.T) {
	t.Parallel()
	bothBundles(t, func() *idem.Config {
		return &idem.Config{Queues: queues(4), PollInterval: 10 * time.Millisecond, DisableMaintenance: true}
	}, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		b.start(t)
		early, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "late", Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		handler := func(_ context.Context, row *idem.JobRow) (json.RawMessage, error) {
			return json.Marshal(row.Kind)
		}
		b.workers.Handle("late", handler)
		const kinds = 8
		ids := make([]int64, kinds)
		startTogether(kinds, func(g int) {
			kind := fmt.Sprint("late-", g)
			b.workers.Handle(kind, handler)
			res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: kind, Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
			if err != nil {
				t.Error(err)
				return
			}
			ids[g] = res.Job.ID
		})
		if t.Failed() {
			return
		}
		for _, row := range waitAll(t, b.client, append(ids, early.Job.ID), waitTimeout) {
			if row.State != idem.StateCompleted || string(row.Result) != fmt.Sprintf("%q", row.Kind) {
				t.Errorf("job %d (%s) %s with %s, want completed with its kind", row.ID, row.Kind, row.State, row.Result)
			}
		}
	})
}
