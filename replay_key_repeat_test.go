package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idem-dev/idem"
)

// testJobReplayKeyRepeatSkipsItsCopies: a keyed replay whose filter also
// selects the copies it made (they keep the original's kind and queue)
// repeated with the same key counts its copies and makes nothing: before
// the fix the repeat copied the copies (new keys, one per copy's id), so
// every job selected ran a third time, and with Limit the copies crowded
// out the originals. A replay under another key still copies everything
// it selects.
func testJobReplayKeyRepeatSkipsItsCopies(t *testing.T, c *idem.Client) {
	ctx := context.Background()
	for i := range 3 {
		r, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "rk", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Opts: &idem.EnqueueOpts{Queue: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		cancelJob(t, c, r.Job.ID)
	}
	// finish cancels the copies that wait to run: only finished jobs are
	// replayed, so the copies are selected by the filter once finished.
	finish := func() {
		t.Helper()
		jobs, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Kind: "rk",
			States: []idem.JobState{idem.StateAvailable}}, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			cancelJob(t, c, j.ID)
		}
	}
	count := func() int {
		t.Helper()
		jobs, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Kind: "rk"}, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	p := &idem.ReplayParams{Filter: idem.JobFilter{Kind: "rk"}, Key: "replay-a"}
	if n, err := c.JobReplay(ctx, p); err != nil || n != 3 {
		t.Fatalf("replay: %d %v, want 3", n, err)
	}
	finish()
	for range 2 {
		if n, err := c.JobReplay(ctx, p); err != nil || n != 3 {
			t.Fatalf("replay repeated with its key: %d %v, want the 3 copies counted", n, err)
		}
		if got := count(); got != 6 {
			t.Fatalf("%d jobs after the repeat, want 6 (3 originals, 3 copies)", got)
		}
	}
	limited := &idem.ReplayParams{Filter: idem.JobFilter{Kind: "rk"}, Key: "replay-b", Limit: 3}
	if n, err := c.JobReplay(ctx, limited); err != nil || n != 3 {
		t.Fatalf("replay b: %d %v, want 3", n, err)
	}
	finish()
	if n, err := c.JobReplay(ctx, limited); err != nil || n != 3 {
		t.Fatalf("replay b repeated: %d %v, want 3", n, err)
	}
	if got := count(); got != 9 {
		t.Fatalf("%d jobs after replay b and its repeat, want 9", got)
	}
}

func TestJobReplayKeyRepeatSkipsItsCopies(t *testing.T) {
	t.Parallel()
	bothStores(t, func() *idem.Config { return nil }, testJobReplayKeyRepeatSkipsItsCopies)
}
