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

// eventCounts counts the observed events by type and job.
type eventCounts struct {
	mu sync.Mutex
	n  map[int64]map[idem.EventType]int
	// outcomes are the outcomes of the finished events, by job.
	outcomes map[int64][]idemtype.Outcome
}

func newEventCounts() *eventCounts {
	return &eventCounts{n: map[int64]map[idem.EventType]int{}, outcomes: map[int64][]idemtype.Outcome{}}
}

func (o *eventCounts) ObserveJob(e *idem.JobEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n[e.JobID] == nil {
		o.n[e.JobID] = map[idem.EventType]int{}
	}
	o.n[e.JobID][e.Type]++
	if e.Type == idem.EventFinished {
		o.outcomes[e.JobID] = append(o.outcomes[e.JobID], e.Outcome)
	}
}

func (o *eventCounts) of(id int64) (map[idem.EventType]int, []idemtype.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[idem.EventType]int{}
	for k, v := range o.n[id] {
		out[k] = v
	}
	return out, append([]idemtype.Outcome(nil), o.outcomes[id]...)
}

// failFinishOnce is a real store whose first JobFinishMany fails without
// writing anything (a store error before the transaction committed).
type failFinishOnce struct {
	store.Store
	failed atomic.Bool
}

func (s *failFinishOnce) JobFinishMany(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	if s.failed.CompareAndSwap(false, true) {
		return nil, errors.New("finish failed before it was written")
	}
	return s.Store.JobFinishMany(ctx, p)
}

// TestPullCachedJobCountedOnceWritten: a pull claim answers a keyed job
// from the result cache; when writing that cached finish fails, the claim
// fails and its jobs are given back, and the next claim settles it. The
// observer (and so /metrics and the store's cache counters) sees one
// claim, one cache hit and one finish for it — those of the claim whose
// writes committed — not one more for the failed claim. On both stores.
func TestPullCachedJobCountedOnceWritten(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			flaky := &failFinishOnce{Store: st}
			flaky.failed.Store(true) // armed below, once the first result is cached
			obs := newEventCounts()
			c, err := idem.NewClient(flaky, &idem.Config{Logger: quietLogger(), Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			zero := time.Duration(0)
			enqueue := func() int64 {
				t.Helper()
				res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "charge",
					Opts: &idem.EnqueueOpts{IdempotencyKey: "charge-1", DedupWindow: &zero}})
				if err != nil {
					t.Fatal(err)
				}
				return res.Job.ID
			}
			p := idem.ClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "puller", Limit: 10, Lease: time.Minute}
			first := enqueue()
			got, err := c.Claim(ctx, p)
			if err != nil || len(got) != 1 || got[0].ID != first {
				t.Fatalf("claim of the first job: %v %v", got, err)
			}
			if _, err := c.Complete(ctx, "", first, got[0].LeaseToken, json.RawMessage(`{"charged":true}`)); err != nil {
				t.Fatal(err)
			}
			cached := enqueue()
			flaky.failed.Store(false)
			if got, err := c.Claim(ctx, p); err == nil {
				t.Fatalf("the claim whose cached finish failed succeeded: %v", got)
			}
			if got, err := c.Claim(ctx, p); err != nil || len(got) != 0 {
				t.Fatalf("the next claim: %v %v, want the cached job settled and nothing to hand out", got, err)
			}
			row, err := c.JobGet(ctx, "", cached)
			if err != nil || row.State != idem.StateCompleted || !row.WasCached {
				t.Fatalf("cached job: %+v %v", row, err)
			}
			n, outcomes := obs.of(cached)
			if n[idem.EventClaimed] != 1 || n[idem.EventCacheHit] != 1 || n[idem.EventFinished] != 1 ||
				len(outcomes) != 1 || outcomes[0] != idemtype.OutcomeCached {
				t.Fatalf("events of the cached job %v (finished %v), want one claim, cache hit and cached finish", n, outcomes)
			}
		})
	}
}

// TestInProcessFinishCountedOnlyWhenWritten: a job cancelled by another
// process while its handler runs (a handler that does not watch its
// context and returns success, before the next heartbeat would tell its
// client of the cancel) has its finish refused by the store: the job stays
// cancelled.
// The observer is not told the job completed (so /metrics does not count
// a completion that never happened); a job whose finish is written is
// told once. On both stores.
func TestInProcessFinishCountedOnlyWhenWritten(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, openOther := openLeaseStore(t, kind)
			other, err := idem.NewClient(openOther(), &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			obs := newEventCounts()
			started, release := make(chan int64, 2), make(chan struct{})
			workers := idem.NewWorkers()
			workers.Handle("stubborn", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
				started <- j.ID
				<-release // ignores its context
				return json.RawMessage(`"done"`), nil
			})
			c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), Observer: obs, Workers: workers,
				Queues: queues(2), PollInterval: 20 * time.Millisecond, DisableMaintenance: true,
				LeaseDuration: 10 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			res, err := c.EnqueueMany(ctx, []idem.EnqueueParams{{Kind: "stubborn"}, {Kind: "stubborn"}})
			if err != nil {
				t.Fatal(err)
			}
			cancelled, kept := res[0].Job.ID, res[1].Job.ID
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				select {
				case <-started:
				case <-time.After(waitTimeout):
					t.Fatal("the handlers did not start")
				}
			}
			if row, err := other.JobCancel(ctx, "", cancelled); err != nil || row.State != idem.StateCancelled {
				t.Fatalf("cancel the running job: %+v %v", row, err)
			}
			close(release)
			if row, err := c.JobWait(ctx, kept); err != nil || row.State != idem.StateCompleted {
				t.Fatalf("the other job: %+v %v", row, err)
			}
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			if err := c.Stop(sctx); err != nil { // every finish answered
				t.Fatal(err)
			}
			if row, err := c.JobGet(ctx, "", cancelled); err != nil || row.State != idem.StateCancelled {
				t.Fatalf("cancelled job after its handler returned: %+v %v", row, err)
			}
			if n, outcomes := obs.of(cancelled); n[idem.EventFinished] != 0 {
				t.Errorf("the cancelled job was reported finished %v (outcomes %v): its finish was never written", n, outcomes)
			}
			if n, outcomes := obs.of(kept); n[idem.EventFinished] != 1 || outcomes[0] != idemtype.OutcomeCompleted {
				t.Errorf("the completed job: events %v, outcomes %v, want one completed finish", n, outcomes)
			}
		})
	}
}
