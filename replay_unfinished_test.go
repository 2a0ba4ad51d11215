package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// replayMix enqueues, in queue "mix" of kind "mix", one job in each state
// it can be put in without a worker — completed, dead, cancelled (the
// finished ones), then available, scheduled, running and retryable — and
// returns their ids by state.
func replayMix(t *testing.T, c *idem.Client) map[idem.JobState]int64 {
	t.Helper()
	ctx := context.Background()
	ids := map[idem.JobState]int64{}
	enqueue := func(o *idem.EnqueueOpts) int64 {
		t.Helper()
		o.Queue = "mix"
		r, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "mix", Args: []byte(`{"n":` + strconv.Itoa(len(ids)) + `}`), Opts: o})
		if err != nil {
			t.Fatal(err)
		}
		return r.Job.ID
	}
	claim := func(id int64) *idem.JobRow {
		t.Helper()
		jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{"mix"}, WorkerID: "w", Limit: 1})
		if err != nil || len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("claim of job %d: %v %v", id, jobs, err)
		}
		return jobs[0]
	}
	id := enqueue(&idem.EnqueueOpts{})
	if _, err := c.Complete(ctx, "", id, claim(id).LeaseToken, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	ids[idem.StateCompleted] = id
	id = enqueue(&idem.EnqueueOpts{})
	if _, err := c.Fail(ctx, "", id, claim(id).LeaseToken, idem.FailParams{Error: "boom", NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	ids[idem.StateDead] = id
	id = enqueue(&idem.EnqueueOpts{})
	if _, err := c.JobCancel(ctx, "", id); err != nil {
		t.Fatal(err)
	}
	ids[idem.StateCancelled] = id
	id = enqueue(&idem.EnqueueOpts{MaxAttempts: 5})
	hour := time.Hour
	if _, err := c.Fail(ctx, "", id, claim(id).LeaseToken, idem.FailParams{Error: "again", RetryAfter: &hour}); err != nil {
		t.Fatal(err)
	}
	ids[idem.StateRetryable] = id
	id = enqueue(&idem.EnqueueOpts{})
	claim(id)
	ids[idem.StateRunning] = id
	ids[idem.StateAvailable] = enqueue(&idem.EnqueueOpts{})
	ids[idem.StateScheduled] = enqueue(&idem.EnqueueOpts{RunAt: time.Now().Add(time.Hour)})
	for st, id := range ids {
		if row, err := c.JobGet(ctx, "", id); err != nil || row.State != st {
			t.Fatalf("job %d: %v %v, want %s", id, row, err, st)
		}
	}
	return ids
}

// replayedOf is the set of originals the jobs of queue copied.
func replayedOf(t *testing.T, c *idem.Client, queue string) map[string]bool {
	t.Helper()
	rows, _, err := c.JobList(context.Background(), &idem.JobListParams{Filter: idem.JobFilter{Queue: queue}, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range rows {
		out[replayOfMeta(t, r)] = true
	}
	return out
}

// testJobReplaySkipsUnfinished: a replay copies only finished jobs
// (completed, dead, cancelled). Before the fix it copied a job still
// available, scheduled, running or retryable too: a keyless copy that ran
// beside the original, which still runs (and a keyed original's work ran
// twice).
func testJobReplaySkipsUnfinished(t *testing.T, c *idem.Client) {
	ctx := context.Background()
	ids := replayMix(t, c)
	n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "mix"}, Queue: "copies"})
	if err != nil || n != 3 {
		t.Fatalf("replay: %d %v, want 3 (the finished jobs)", n, err)
	}
	got := replayedOf(t, c, "copies")
	for st, id := range ids {
		if want := st.Finished(); got[strconv.FormatInt(id, 10)] != want {
			t.Errorf("job %d (%s): copied %v, want %v", id, st, !want, want)
		}
	}
	// JobReplayReport counts the skipped jobs: all four unfinished ones,
	// those the states of the filter name, and none of the copies a
	// keyed replay made (it counts them through their originals when
	// repeated). The count is bounded by the limit, as the copies are.
	for _, tc := range []struct {
		name           string
		p              idem.ReplayParams
		enqueued, skip int
	}{
		{"every state", idem.ReplayParams{Filter: idem.JobFilter{Queue: "mix"}, Queue: "more"}, 3, 4},
		{"unfinished states only", idem.ReplayParams{Filter: idem.JobFilter{Queue: "mix",
			States: []idem.JobState{idem.StateAvailable, idem.StateRunning}}, Queue: "more"}, 0, 2},
		{"one of each", idem.ReplayParams{Filter: idem.JobFilter{Queue: "mix",
			States: []idem.JobState{idem.StateRunning, idem.StateDead}}, Queue: "more"}, 1, 1},
		{"limited", idem.ReplayParams{Filter: idem.JobFilter{Queue: "mix"}, Queue: "more", Limit: 2}, 2, 2},
		// The copies stay in queue mix, where they wait to run.
		{"keyed", idem.ReplayParams{Filter: idem.JobFilter{Queue: "mix"}, Key: "rk"}, 3, 4},
		{"keyed repeated", idem.ReplayParams{Filter: idem.JobFilter{Queue: "mix"}, Key: "rk"}, 3, 4},
	} {
		res, err := c.JobReplayReport(ctx, &tc.p)
		if err != nil || res.Enqueued != tc.enqueued || res.Skipped != tc.skip {
			t.Errorf("%s: %+v %v; want %d enqueued, %d skipped", tc.name, res, err, tc.enqueued, tc.skip)
		}
	}
	if _, err := c.JobReplayReport(ctx, &idem.ReplayParams{Filter: idem.JobFilter{States: []idem.JobState{"nope"}}}); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("replay of an unknown state: %v, want ErrInvalid", err)
	}
}

func TestJobReplaySkipsUnfinished(t *testing.T) {
	t.Parallel()
	bothStores(t, func() *idem.Config { return nil }, testJobReplaySkipsUnfinished)
}

// replayOfMeta is metadata.replay_of of a copy.
func replayOfMeta(t *testing.T, r *idem.JobRow) string {
	t.Helper()
	var m struct {
		ReplayOf string `json:"replay_of"`
	}
	if err := json.Unmarshal(r.Metadata, &m); err != nil {
		t.Fatalf("metadata of job %d: %v", r.ID, err)
	}
	return m.ReplayOf
}
