package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestJobTimeout: a Go handler past its kind's timeout has its context
// cancelled with cause ErrJobTimeout; the attempt fails as a timeout and
// is retried; the retry (which finishes in time) completes. The kind's
// timeout wins over the queue's.
func TestJobTimeout(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := setup(t, &idem.Config{Queues: queues(1), Now: clock.Now, DisableMaintenance: true,
		Retry:          idem.RetryPolicy{Base: time.Second, Jitter: -1},
		TimeoutByQueue: map[string]time.Duration{idem.DefaultQueue: time.Hour},
		TimeoutByKind:  map[string]time.Duration{"slow": 20 * time.Millisecond}})
	causes := make(chan error, 2)
	b.workers.Handle("slow", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		if j.Attempt > 1 {
			return json.RawMessage(`"done"`), nil
		}
		<-ctx.Done() // the deadline, not a sleep: the test waits on the cancellation
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	r, err := b.client.EnqueueRaw(t.Context(), idem.EnqueueParams{Kind: "slow", Opts: &idem.EnqueueOpts{MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	row := waitState(t, b, r.Job.ID, idem.StateRetryable)
	if cause := <-causes; !errors.Is(cause, idem.ErrJobTimeout) {
		t.Errorf("handler context cause = %v, want ErrJobTimeout", cause)
	}
	if row.Attempt != 1 || !strings.HasPrefix(row.LastError, idem.ErrJobTimeout.Error()+" after 20ms") {
		t.Fatalf("after the timeout: attempt %d, last error %q", row.Attempt, row.LastError)
	}
	clock.Add(time.Second) // the backoff
	row = waitState(t, b, r.Job.ID, idem.StateCompleted)
	if row.Attempt != 2 || string(row.Result) != `"done"` {
		t.Errorf("retry: attempt %d result %s", row.Attempt, row.Result)
	}
	attempts, err := b.client.JobAttempts(t.Context(), "", row.ID)
	if err != nil || len(attempts) != 2 || attempts[0].Outcome != "failed" || !strings.Contains(attempts[0].Error, "job timed out") {
		t.Errorf("attempts %+v (err %v)", attempts, err)
	}
}

// TestJobTimeoutConfig: a negative timeout is refused.
func TestJobTimeoutConfig(t *testing.T) {
	t.Parallel()
	if _, err := idem.NewClient(testStore(t), &idem.Config{TimeoutByKind: map[string]time.Duration{"k": -time.Second}}); err == nil {
		t.Error("a negative timeout was accepted")
	}
}
