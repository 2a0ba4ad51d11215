package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// replayOriginals enqueues n small jobs of kind "orig" in queue "q" and
// cancels them: a replay copies finished jobs only.
func replayOriginals(t *testing.T, c *idem.Client, n int) {
	t.Helper()
	ctx := context.Background()
	for n > 0 {
		items := make([]idem.EnqueueParams, min(n, idem.MaxBatch))
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "orig", Opts: &idem.EnqueueOpts{Queue: "q"}}
		}
		res, err := c.EnqueueMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			cancelJob(t, c, r.Job.ID)
		}
		n -= len(items)
	}
}

// cancelJob cancels job id (of the default tenant), finishing it so that
// a replay copies it.
func cancelJob(t *testing.T, c *idem.Client, id int64) {
	t.Helper()
	if _, err := c.JobCancel(context.Background(), "", id); err != nil {
		t.Fatalf("cancel job %d: %v", id, err)
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
	r, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "orig", Opts: &idem.EnqueueOpts{Queue: "q", Metadata: big}})
	if err != nil {
		t.Fatal(err)
	}
	cancelJob(t, c, r.Job.ID)
	n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "orig", Queue: "q"}, Queue: "copies", Limit: 2000})
	if !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("replay: %d, %v; want an error wrapping ErrInvalid", n, err)
	}
	if got := countQueue(t, c, "copies"); got != 0 || n != 0 {
		t.Fatalf("a refused replay answered %d and left %d copies; want none", n, got)
	}
}

// TestJobReplayRepeatedWithTheSameKeyCopiesNoJobTwice: a replay repeated
// with the same key (its first answer lost, its copies committed) copies
// no job again and answers the same count; another key is another replay.
// (A replay that fails copies nothing: TestJobReplayFailureCopiesNothing.)
func TestJobReplayRepeatedWithTheSameKeyCopiesNoJobTwice(t *testing.T) {
	t.Parallel()
	c := setup(t, nil).client
	const total = idem.MaxBatch + 1
	replayOriginals(t, c, total)
	p := &idem.ReplayParams{Filter: idem.JobFilter{Kind: "orig", Queue: "q"}, Queue: "copies", Limit: 2000, Key: "replay-1"}
	for i := range 2 {
		n, err := c.JobReplay(context.Background(), p)
		if err != nil || n != total {
			t.Fatalf("replay %d with the key: %d, %v; want %d", i+1, n, err, total)
		}
		if got := countQueue(t, c, "copies"); got != total {
			t.Fatalf("after replay %d with the key: %d copies, want %d (no job copied twice)", i+1, got, total)
		}
	}
	p.Key = "replay-2"
	if n, err := c.JobReplay(context.Background(), p); err != nil || n != total {
		t.Fatalf("replay with another key: %d %v", n, err)
	}
	if got := countQueue(t, c, "copies"); got != 2*total {
		t.Fatalf("after another key's replay: %d copies, want %d", got, 2*total)
	}
}
