package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// TestSlowClaimAnswerDoesNotStartOnAnEndingLease: a claim whose answer
// comes back late (the claim's round trip took most of the lease, here
// on a fake clock) must not start its handler on what is left of the
// lease: the heartbeater renews every third of a lease, on its own
// schedule, so a handler started with a second left runs unrenewed past
// its lease's end, when the rescuer may give the job to another process.
// With most of the lease gone the runtime renews the lease before the
// handler starts; with the lease over (the store no longer renews it) the
// job is given back, its attempt not counted, and runs on a later claim.
// Before the fix the handler started at once with the claim's lease end.
func TestSlowClaimAnswerDoesNotStartOnAnEndingLease(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	for _, kind := range leaseStoreKinds {
		for _, tc := range []struct {
			name string
			late time.Duration // how far the clock moves while the answer is held
		}{{"nearly_over", lease - time.Second}, {"over", lease + time.Second}} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				raw, _ := openLeaseStore(t, kind)
				clock := &fakeClock{now: time.Now().UTC()}
				type start struct {
					left    time.Duration // the lease left as the handler starts, as stored
					attempt int
				}
				started := make(chan start, 2)
				workers := idem.NewWorkers()
				workers.Handle("late", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
					row, err := raw.JobGet(ctx, &store.JobGetParams{ID: j.ID})
					if err != nil || row.LeaseExpiresAt == nil {
						started <- start{left: -1, attempt: j.Attempt}
						return nil, err
					}
					started <- start{left: row.LeaseExpiresAt.Sub(clock.Now()), attempt: j.Attempt}
					return json.RawMessage(`"ok"`), nil
				})
				c, id := runSlowClaim(t, raw, clock, workers, nil, lease, tc.late, idem.EnqueueParams{Kind: "late"})
				select {
				case s := <-started:
					if s.left < 2*lease/3 {
						t.Fatalf("the handler started with %s of its lease left, want at least %s (renewed first)", s.left, 2*lease/3)
					}
					if s.attempt != 1 {
						t.Fatalf("the handler started as attempt %d, want 1 (a lease given back does not count)", s.attempt)
					}
				case <-time.After(leaseTimeout):
					t.Fatal("the handler never started")
				}
				waitCompletedFirstAttempt(t, c, id)
			})
		}
	}
}

// runSlowClaim starts a client with workers on raw behind a claimGate, its
// time from clock, and enqueues p; once the job's claim has committed it
// moves clock by late (the claim's answer arrives that late), lets the
// answer through and returns the client (stopped at the test's end) and the
// job's ID.
func runSlowClaim(t *testing.T, raw store.Store, clock *fakeClock, workers *idem.Workers, obs idem.Observer,
	lease, late time.Duration, p idem.EnqueueParams) (*idem.Client, int64) {
	t.Helper()
	ctx := context.Background()
	st, release := newClaimGate(raw, 2)
	c, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(), Observer: obs,
		LeaseDuration: lease, PollInterval: 20 * time.Millisecond, DisableMaintenance: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueRaw(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(ctx) })
	t.Cleanup(release) // on failure: let the claim through (before the Stop)
	select {
	case <-st.claimed:
	case <-time.After(leaseTimeout):
		t.Fatal("the job was never claimed")
	}
	clock.Add(late)
	release()
	return c, res.Job.ID
}

// waitCompletedFirstAttempt waits for job id and fails unless it completed
// at its first attempt.
func waitCompletedFirstAttempt(t *testing.T, c *idem.Client, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
	defer cancel()
	row, err := c.JobWait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idem.StateCompleted || row.Attempt != 1 {
		t.Fatalf("job %s at attempt %d, want completed at attempt 1", row.State, row.Attempt)
	}
}
