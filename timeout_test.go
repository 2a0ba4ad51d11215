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

// timeoutClient returns a client without workers or maintenance on a fresh
// store of sk, with cfg's timeouts, its clock the returned fakeClock (at
// 2026-01-01 00:00 UTC).
func timeoutClient(t *testing.T, sk storeKind, cfg *idem.Config) (*idem.Client, *fakeClock) {
	t.Helper()
	st, _ := sk.open(t)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Now, cfg.Logger, cfg.DisableMaintenance = clock.Now, quietLogger(), true
	c, err := idem.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

// TestPullLeaseCappedAtTimeout (both stores): a pull claim's lease ends at
// the job's timeout however long a lease was asked for, heartbeats never
// extend it past the deadline, and a heartbeat at the deadline fails the
// attempt as a timeout (retryable).
func TestPullLeaseCappedAtTimeout(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			c, clock := timeoutClient(t, sk, &idem.Config{TimeoutByKind: map[string]time.Duration{"render": 10 * time.Second}})
			ctx := t.Context()
			slow, _ := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "render", Opts: &idem.EnqueueOpts{Priority: 1}})
			plain, _ := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "other"})
			jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "w1", Limit: 2, Lease: time.Minute})
			if err != nil || len(jobs) != 2 {
				t.Fatalf("claim: %d jobs, %v", len(jobs), err)
			}
			start := clock.Now()
			for _, j := range jobs {
				want := start.Add(time.Minute)
				if j.ID == slow.Job.ID {
					want = start.Add(10 * time.Second)
				}
				stored, err := c.JobGet(ctx, "", j.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !j.LeaseExpiresAt.Equal(want) || !stored.LeaseExpiresAt.Equal(want) {
					t.Errorf("job %d: lease to %v (stored %v), want %v", j.ID, j.LeaseExpiresAt, stored.LeaseExpiresAt, want)
				}
			}
			token := jobs[0].LeaseToken
			if jobs[0].ID != slow.Job.ID {
				token = jobs[1].LeaseToken
			}
			clock.Add(5 * time.Second)
			until, err := c.Heartbeat(ctx, "", slow.Job.ID, token, time.Minute)
			if err != nil || !until.Equal(start.Add(10*time.Second)) {
				t.Errorf("heartbeat before the deadline: %v, %v; want the deadline", until, err)
			}
			clock.Add(5 * time.Second)
			_, err = c.Heartbeat(ctx, "", slow.Job.ID, token, time.Minute)
			if !errors.Is(err, idem.ErrJobTimeout) || !errors.Is(err, idem.ErrLeaseLost) {
				t.Fatalf("heartbeat at the deadline: %v, want ErrJobTimeout and ErrLeaseLost", err)
			}
			row, err := c.JobGet(ctx, "", slow.Job.ID)
			if err != nil || row.State != idem.StateRetryable || !strings.HasPrefix(row.LastError, "job timed out after 10s") {
				t.Errorf("after the timeout: %s %q (%v)", row.State, row.LastError, err)
			}
			if _, err := c.Complete(ctx, "", plain.Job.ID, func() string {
				if jobs[0].ID == plain.Job.ID {
					return jobs[0].LeaseToken
				}
				return jobs[1].LeaseToken
			}(), nil); err != nil {
				t.Errorf("the job without a timeout: %v", err)
			}
		})
	}
}

// TestJobOwnTimeout (both stores): EnqueueOpts.Timeout is stored with the
// job and wins over the kind's: the pull lease ends at it, and a Go
// handler's context ends at it.
func TestJobOwnTimeout(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			c, clock := timeoutClient(t, sk, &idem.Config{TimeoutByKind: map[string]time.Duration{"render": time.Hour}})
			ctx := t.Context()
			r, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "render", Opts: &idem.EnqueueOpts{Timeout: 3 * time.Second}})
			if err != nil || r.Job.Timeout != 3*time.Second {
				t.Fatalf("enqueue: timeout %v, %v", r.Job.Timeout, err)
			}
			jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "w", Lease: time.Minute})
			if err != nil || len(jobs) != 1 || !jobs[0].LeaseExpiresAt.Equal(clock.Now().Add(3*time.Second)) {
				t.Fatalf("claim: %v %v", jobs, err)
			}
			if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "x", Opts: &idem.EnqueueOpts{Timeout: -time.Second}}); !errors.Is(err, idem.ErrInvalid) {
				t.Errorf("negative timeout: %v, want ErrInvalid", err)
			}
		})
	}
}
