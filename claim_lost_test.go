package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// lostAnswers is a real store whose first claims that take jobs commit and
// then answer with an error instead of the jobs: what a connection cut
// after the commit looks like to the caller.
type lostAnswers struct {
	store.Store
	left atomic.Int32
}

func (s *lostAnswers) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	jobs, err := s.Store.JobClaim(ctx, p)
	if err == nil && len(jobs) > 0 && s.left.Add(-1) >= 0 {
		return nil, errors.New("connection reset by peer (the claim's answer was lost)")
	}
	return jobs, err
}

// TestLostClaimAnswerGivesJobsBack: the first claims of a worker commit
// but their answers are lost. Their jobs, allowed one attempt and leased
// for ten minutes, complete at once, each run once, in attempt 1 (the
// lost claim's attempt given back, recorded as released). Without that
// they would stay running, owned by nobody, until the rescuer took them
// back ten minutes later — and die, their only attempt used.
func TestLostClaimAnswerGivesJobsBack(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			lossy := &lostAnswers{Store: st}
			lossy.left.Store(2)
			var mu sync.Mutex
			runs := map[int64]int{}
			workers := idem.NewWorkers()
			workers.Handle("once", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
				mu.Lock()
				runs[j.ID]++
				mu.Unlock()
				return json.RawMessage(`"ok"`), nil
			})
			c, err := idem.NewClient(lossy, &idem.Config{Workers: workers, Queues: queues(4), WorkerID: "lossy",
				Logger: quietLogger(), LeaseDuration: 10 * time.Minute, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			items := make([]idem.EnqueueParams, 6)
			for i := range items {
				items[i] = idem.EnqueueParams{Kind: "once", Opts: &idem.EnqueueOpts{MaxAttempts: 1}}
			}
			ids := enqueueChunks(t, c, items)
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := c.Stop(ctx); err != nil {
					t.Errorf("stop: %v", err)
				}
			})
			rows := waitAll(t, c, ids, 20*time.Second)
			if lossy.left.Load() >= 0 {
				t.Fatalf("only %d claims lost their answers, want 2", 2-lossy.left.Load())
			}
			released := 0
			for _, row := range rows {
				if row.State != idem.StateCompleted || row.Attempt != 1 {
					t.Errorf("job %d: %s in attempt %d, want completed in attempt 1", row.ID, row.State, row.Attempt)
				}
				as, err := c.JobAttempts(context.Background(), "", row.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range as {
					if a.Outcome == idemtype.OutcomeReleased {
						released++
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if runs[id] != 1 {
					t.Errorf("job %d ran %d times, want once", id, runs[id])
				}
			}
			if released == 0 {
				t.Errorf("no attempt was recorded as released: the lost claims took nothing?")
			}
		})
	}
}

// TestLostPullClaimAnswerGivesJobsBack: a pull claim (Client.Claim, what
// POST /v1/jobs/claim runs) whose answer is lost fails, and its jobs are
// available again at once for the next claim, with their attempt.
func TestLostPullClaimAnswerGivesJobsBack(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			lossy := &lostAnswers{Store: st}
			lossy.left.Store(1)
			c, err := idem.NewClient(lossy, &idem.Config{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			items := make([]idem.EnqueueParams, 3)
			for i := range items {
				items[i] = idem.EnqueueParams{Kind: "pulled", Opts: &idem.EnqueueOpts{MaxAttempts: 1}}
			}
			ids := enqueueChunks(t, c, items)
			ctx := context.Background()
			p := idem.ClaimParams{Queues: []string{"default"}, WorkerID: "puller", Limit: 10, Lease: 10 * time.Minute}
			if _, err := c.Claim(ctx, p); err == nil {
				t.Fatal("the claim whose answer was lost succeeded")
			}
			got, err := c.Claim(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(ids) {
				t.Fatalf("the next claim took %d jobs, want the %d the lost claim had taken", len(got), len(ids))
			}
			for _, j := range got {
				if j.Attempt != 1 {
					t.Errorf("job %d claimed in attempt %d, want 1", j.ID, j.Attempt)
				}
			}
		})
	}
}
