package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
)

// TestDLQRequeueByFilterLeavesResolvedJobs: a dead job resolved with a
// note is dealt with and kept for audit (seed 002 retries the dead jobs
// whose resolved_at is null): a requeue by filter leaves it dead unless
// the filter asks for resolved jobs. Before the fix a requeue by queue or
// kind ran the resolved job again.
func TestDLQRequeueByFilterLeavesResolvedJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &idem.Config{Queues: queues(2)})
	b.workers.Handle("dies", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		return nil, idem.JobPermanent(errors.New("dies"))
	})
	var ids []int64
	for range 2 {
		r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "dies"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	b.start(t)
	for _, id := range ids {
		waitState(t, b, id, idem.StateDead)
	}
	if err := b.client.QueuePause(ctx, idem.DefaultQueue, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.DLQResolve(ctx, "", ids[0], "handled by hand"); err != nil {
		t.Fatal(err)
	}
	n, err := b.client.DLQRequeue(ctx, nil, idem.JobFilter{Kind: "dies"})
	if err != nil || n != 1 {
		t.Fatalf("requeue by kind: %d %v; want 1 (the unresolved job)", n, err)
	}
	if row, err := b.client.JobGet(ctx, "", ids[0]); err != nil || row.State != idem.StateDead {
		t.Fatalf("resolved job after a requeue by kind: %v %v; want it left dead", row, err)
	}
	resolved := true
	if n, err := b.client.DLQRequeue(ctx, nil, idem.JobFilter{Kind: "dies", Resolved: &resolved}); err != nil || n != 1 {
		t.Fatalf("requeue of the resolved: %d %v; want 1", n, err)
	}
}
