package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// dueBound is how late after its run_at a due job may start in the tests
// of due wake-ups: generous (the poll interval is 100 ms), so that only a
// job nobody takes until a much later poll, or ever, fails them.
const dueBound = 10 * time.Second

// dueStart is one start of a job: when its attempt started here and the
// run_at it was due at.
type dueStart struct {
	attempt int
	runAt   time.Time
	at      time.Time
}

// checkDueStart fails unless s started at or after its run_at (by the
// stores' microseconds) and within dueBound of it; it logs the latency.
func checkDueStart(t *testing.T, what string, s dueStart) {
	t.Helper()
	late := s.at.Sub(s.runAt)
	t.Logf("%s: attempt %d started %v after its run_at", what, s.attempt, late)
	if s.at.Before(s.runAt.Truncate(time.Microsecond)) {
		t.Errorf("%s: attempt %d started at %v, before its run_at %v", what, s.attempt, s.at, s.runAt)
	}
	if late > dueBound {
		t.Errorf("%s: attempt %d started %v after its run_at; want within %v (polls every %v)",
			what, s.attempt, late, dueBound, idem.DefaultPollInterval)
	}
}

// TestDueJobWakesIdleWorker (both stores): with maintenance disabled (no
// promoter to promote and announce due jobs), an idle worker's producer
// starts a job scheduled 300 ms ahead at its run_at (its claims promote
// it), and again its retry due 200 ms after a failure: within a poll, not
// never.
func TestDueJobWakesIdleWorker(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			starts := make(chan dueStart, 4)
			workers := idem.NewWorkers()
			workers.Handle("due", func(ctx context.Context, row *idem.JobRow) (json.RawMessage, error) {
				starts <- dueStart{attempt: row.Attempt, runAt: row.RunAt, at: time.Now()}
				if row.Attempt == 1 {
					return nil, idem.JobRetryAfter(200*time.Millisecond, errors.New("again"))
				}
				return nil, nil
			})
			c, err := idem.NewClient(st, &idem.Config{Workers: workers, Logger: quietLogger(), DisableMaintenance: true,
				Queues: map[string]idem.QueueConfig{"due": {MaxWorkers: 2}}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := c.Stop(sctx); err != nil {
					t.Errorf("stop: %v", err)
				}
			})
			runAt := time.Now().Add(300 * time.Millisecond)
			res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "due", Opts: &idem.EnqueueOpts{Queue: "due", RunAt: runAt}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Job.State != idem.StateScheduled {
				t.Fatalf("enqueued %s, want scheduled", res.Job.State)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*dueBound+5*time.Second)
			defer cancel()
			row, err := c.JobWait(wctx, res.Job.ID)
			if err != nil {
				t.Fatalf("the due job did not finish (not started at its run_at or its retry's): %v", err)
			}
			if row.State != idem.StateCompleted || row.Attempt != 2 {
				t.Fatalf("job %s at attempt %d, want completed at attempt 2", row.State, row.Attempt)
			}
			first, second := <-starts, <-starts
			checkDueStart(t, "scheduled", first)
			checkDueStart(t, "retry", second)
			if !first.runAt.Equal(runAt.Truncate(time.Microsecond)) {
				t.Errorf("first attempt ran for run_at %v, want %v", first.runAt, runAt)
			}
		})
	}
}

// TestDueJobWakesLongPoll (both stores): with maintenance disabled, a
// pull claim long-polling on a queue whose only job is scheduled 300 ms
// ahead takes it at its run_at, and a claim long-polling after that job
// failed with a 200 ms retry takes its retry when due: within a poll of
// the run_at, never before it.
func TestDueJobWakesLongPoll(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			runAt := time.Now().Add(300 * time.Millisecond)
			res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "due", Opts: &idem.EnqueueOpts{Queue: "due", RunAt: runAt}})
			if err != nil {
				t.Fatal(err)
			}
			claim := func(what string) *idem.JobRow {
				t.Helper()
				jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{"due"}, WorkerID: "w", Wait: 2 * dueBound})
				at := time.Now()
				if err != nil || len(jobs) != 1 || jobs[0].ID != res.Job.ID {
					t.Fatalf("%s: the long poll returned %d jobs, %v; want job %d", what, len(jobs), err, res.Job.ID)
				}
				checkDueStart(t, what, dueStart{attempt: jobs[0].Attempt, runAt: jobs[0].RunAt, at: at})
				return jobs[0]
			}
			j := claim("scheduled")
			retry := 200 * time.Millisecond
			failed, err := c.Fail(ctx, "", j.ID, j.LeaseToken, idem.FailParams{Error: "again", RetryAfter: &retry})
			if err != nil {
				t.Fatal(err)
			}
			if failed.State != idem.StateRetryable {
				t.Fatalf("failed job %s, want retryable", failed.State)
			}
			if j2 := claim("retry"); j2.Attempt != 2 || !j2.RunAt.Equal(failed.RunAt) {
				t.Fatalf("retry claimed at attempt %d for run_at %v; want attempt 2 at %v", j2.Attempt, j2.RunAt, failed.RunAt)
			}
		})
	}
}
