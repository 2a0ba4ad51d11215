package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// replayOriginals enqueues n small jobs of kind "orig" in queue "q".
func replayOriginals(t *testing.T, c *idem.Client, n int) {
	t.Helper()
	ctx := context.Background()
	for n > 0 {
		items := make([]idem.EnqueueParams, min(n, idem.MaxBatch))
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "orig", Opts: &idem.EnqueueOpts{Queue: "q"}}
		}
		if _, err := c.EnqueueMany(ctx, items); err != nil {
			t.Fatal(err)
		}
		n -= len(items)
	}
}

// countQueue is how many jobs queue holds.
func countQueue(t *testing.T, c *idem.Client, queue string) int {
	t.Helper()
	n := 0
	lp := &idem.JobListParams{Filter: idem.JobFilter{Queue: queue}, Limit: 500}
	for {
		rows, next, err := c.JobList(context.Background(), lp)
		if err != nil {
			t.Fatal(err)
		}
		n += len(rows)
		if next == 0 {
			return n
		}
		lp.Cursor = next
	}
}

// TestJobReplayRefusesACopyItCannotMakeBeforeCopyingAny: a job whose
// metadata is within a few bytes of the limit cannot be copied (replay_of
// pushes it over). Before the fix the replay failed at that job's batch,
// after the earlier batch (the first 1000 copies) was committed, and
// answered only an error: a retry copied those 1000 again.
func TestJobReplayRefusesACopyItCannotMakeBeforeCopyingAny(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.client
	ctx := context.Background()
	replayOriginals(t, c, idem.MaxBatch)
	// The newest original, so the last of the oldest-first copies: its
	// metadata is valid, but not with replay_of added.
	pad := idem.MaxArgsBytes - len(`{"p":""}`)
	big := []byte(`{"p":"` + strings.Repeat("x", pad) + `"}`)
	if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "orig", Opts: &idem.EnqueueOpts{Queue: "q", Metadata: big}}); err != nil {
		t.Fatal(err)
	}
	n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "orig", Queue: "q"}, Queue: "copies", Limit: 2000})
	if !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("replay: %d, %v; want an error wrapping ErrInvalid", n, err)
	}
	if got := countQueue(t, c, "copies"); got != 0 || n != 0 {
		t.Fatalf("a refused replay answered %d and left %d copies; want none", n, got)
	}
}

// cancelOnCopy cancels a context at the first copy enqueued in queue
// "copies": the replay's next batch then fails, as after a crash or a
// lost database connection between two batches.
type cancelOnCopy struct{ cancel context.CancelFunc }

func (o cancelOnCopy) ObserveJob(e *idem.JobEvent) {
	if e.Type == idem.EventEnqueued && e.Queue == "copies" {
		o.cancel()
	}
}

// TestJobReplayRetriedWithTheSameKeyCopiesNoJobTwice: a replay that fails
// between two batches and is retried with the same key copies each job
// once. Before the fix the retry copied again the batch the failed
// attempt had committed.
func TestJobReplayRetriedWithTheSameKeyCopiesNoJobTwice(t *testing.T) {
	t.Parallel()
	first, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := setup(t, &idem.Config{Observer: cancelOnCopy{cancel}})
	c := b.client
	const total = idem.MaxBatch + 1
	replayOriginals(t, c, total)
	p := &idem.ReplayParams{Filter: idem.JobFilter{Kind: "orig", Queue: "q"}, Queue: "copies", Limit: 2000, Key: "replay-1"}
	if n, err := c.JobReplay(first, p); err == nil {
		t.Fatalf("first attempt: %d copies and no error; the test wants it cut after the first batch", n)
	}
	if got := countQueue(t, c, "copies"); got != idem.MaxBatch {
		t.Fatalf("first attempt left %d copies, want %d (its first batch)", got, idem.MaxBatch)
	}
	n, err := c.JobReplay(context.Background(), p)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := countQueue(t, c, "copies"); got != total || n != total {
		t.Fatalf("after the retry: answered %d, %d copies; want %d of each (no job copied twice)", n, got, total)
	}
	// Another key is another replay.
	p.Key = "replay-2"
	if n, err := c.JobReplay(context.Background(), p); err != nil || n != total {
		t.Fatalf("replay with another key: %d %v", n, err)
	}
}
