package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/idem-dev/idem"
)

// TestJobReplayCopies: a replay with a limit copies the newest jobs the
// filter selects, enqueued oldest first; each copy keeps the original's
// kind, args, priority, attempts, partition, tenant and metadata, adds
// metadata.replay_of, and has no idempotency key; a copy of a copy names
// the copy. A bad target queue enqueues nothing.
func TestJobReplayCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.client
	ctx := context.Background()
	opts := []*idem.EnqueueOpts{
		{Queue: "q"},
		{Queue: "q", Metadata: json.RawMessage(`{"region":"eu"}`)},
		{Queue: "q", Priority: 3, MaxAttempts: 7, PartitionKey: "p1"},
		{Queue: "q", IdempotencyKey: "orig-key", Metadata: json.RawMessage(`{"replay_of":"999","n":2}`)},
		{Queue: "q", Tenant: "other"},
	}
	var orig []*idem.JobRow
	for i, o := range opts {
		res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "r", Args: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`), Opts: o})
		if err != nil {
			t.Fatal(err)
		}
		orig = append(orig, res.Job)
	}
	if n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "r"}, Queue: "bad queue"}); !errors.Is(err, idem.ErrInvalid) || n != 0 {
		t.Fatalf("replay to a bad queue: %d %v", n, err)
	}
	n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "r", Queue: "q"}, Queue: "copies", Limit: 3})
	if err != nil || n != 3 {
		t.Fatalf("replay: %d %v, want 3", n, err)
	}
	copies, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Queue: "copies"}, Limit: 10})
	if err != nil || len(copies) != 3 {
		t.Fatalf("copies: %d %v", len(copies), err)
	}
	// Newest first in the list: the copies of originals 3, 2, 1 (the
	// default tenant's newest three), the copy of 1 enqueued first.
	for i, cp := range copies {
		o := orig[3-i]
		var meta map[string]any
		if err := json.Unmarshal(cp.Metadata, &meta); err != nil {
			t.Fatal(err)
		}
		if meta["replay_of"] != strconv.FormatInt(o.ID, 10) {
			t.Fatalf("copy %d is of %v, want %d", cp.ID, meta["replay_of"], o.ID)
		}
		if cp.Kind != o.Kind || string(cp.Args) != string(o.Args) || cp.Priority != o.Priority || cp.MaxAttempts != o.MaxAttempts ||
			cp.PartitionKey != o.PartitionKey || cp.Tenant != o.Tenant || cp.IdempotencyKey != "" || cp.Queue != "copies" {
			t.Fatalf("copy %+v of %+v", cp, o)
		}
		if i > 0 && cp.ID > copies[i-1].ID {
			t.Fatalf("copies out of order: %d after %d", cp.ID, copies[i-1].ID)
		}
	}
	var m0, m1, m2 map[string]any
	_ = json.Unmarshal(copies[0].Metadata, &m0)
	_ = json.Unmarshal(copies[1].Metadata, &m1)
	_ = json.Unmarshal(copies[2].Metadata, &m2)
	if m0["n"] != float64(2) || len(m0) != 2 || len(m1) != 1 || m2["region"] != "eu" || len(m2) != 2 {
		t.Fatalf("metadata kept: %v, %v and %v", m0, m1, m2)
	}
	n, err = c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Queue: "copies"}, Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("replay of a copy: %d %v", n, err)
	}
	again, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Queue: "copies"}, Limit: 10})
	if err != nil || len(again) != 4 {
		t.Fatalf("after replaying a copy: %d %v", len(again), err)
	}
	var meta map[string]any
	_ = json.Unmarshal(again[0].Metadata, &meta)
	if meta["replay_of"] != strconv.FormatInt(copies[0].ID, 10) {
		t.Fatalf("a copy of a copy names %v, want the copy %d", meta["replay_of"], copies[0].ID)
	}
}
