package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestJobReplayKeepsTheJobsOwnSettings: a replayed job keeps its own
// timeout and retry policy, as it keeps its priority and max attempts.
// Before the fix the copy dropped both (replay predates them): a job
// enqueued with a 5 s limit per attempt ran its copy without any, and a
// copy backed off by the queue's policy instead of its own.
func TestJobReplayKeepsTheJobsOwnSettings(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.client
	ctx := context.Background()
	retry := &idem.RetryPolicy{Base: 3 * time.Second, Factor: 3, Max: time.Minute, Jitter: -1,
		Delays: []time.Duration{time.Second, 2 * time.Second}}
	orig, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "own", Opts: &idem.EnqueueOpts{Queue: "q",
		Timeout: 5 * time.Second, Retry: retry}})
	if err != nil {
		t.Fatal(err)
	}
	cancelJob(t, c, orig.Job.ID) // a replay copies finished jobs only
	if n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "own"}, Queue: "copies"}); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	copies, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Queue: "copies"}})
	if err != nil || len(copies) != 1 {
		t.Fatalf("copies: %d %v", len(copies), err)
	}
	cp := copies[0]
	var want, got idem.RetryPolicy
	if err := json.Unmarshal(orig.Job.RetryPolicy, &want); err != nil {
		t.Fatalf("original's retry policy %q: %v", orig.Job.RetryPolicy, err)
	}
	_ = json.Unmarshal(cp.RetryPolicy, &got)
	if cp.Timeout != orig.Job.Timeout || len(cp.RetryPolicy) == 0 || got.Base != want.Base || got.Factor != want.Factor ||
		got.Max != want.Max || got.Jitter != want.Jitter || len(got.Delays) != len(want.Delays) {
		t.Fatalf("copy has timeout %v and retry policy %s; the original %v and %s",
			cp.Timeout, cp.RetryPolicy, orig.Job.Timeout, orig.Job.RetryPolicy)
	}
}
