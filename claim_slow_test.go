package idem_test

import (
	"context"
	"encoding/json"
	"sync"
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
				ctx := context.Background()
				raw, _ := openLeaseStore(t, kind)
				st := &claimGate{Store: raw, claimed: make(chan []*idem.JobRow, 2), open: make(chan struct{})}
				var open sync.Once
				release := func() { open.Do(func() { close(st.open) }) }
				defer release()
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
				c, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(),
					LeaseDuration: lease, PollInterval: 20 * time.Millisecond, DisableMaintenance: true, Now: clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "late"})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Stop(ctx) })
				select {
				case <-st.claimed:
				case <-time.After(leaseTimeout):
					t.Fatal("the job was never claimed")
				}
				clock.Add(tc.late) // the answer arrives this late
				release()
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
				wctx, cancel := context.WithTimeout(ctx, leaseTimeout)
				defer cancel()
				row, err := c.JobWait(wctx, res.Job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if row.State != idem.StateCompleted || row.Attempt != 1 {
					t.Fatalf("job %s at attempt %d, want completed at attempt 1", row.State, row.Attempt)
				}
			})
		}
	}
}
