package completer_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/completer"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// claimed inserts and claims n jobs and returns their completed finishes.
func claimed(t *testing.T, st store.Store, n int) []*store.JobFinishParams {
	t.Helper()
	ctx := context.Background()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Tenant: "t", Queue: "q", Kind: "k", Args: []byte("{}"), MaxAttempts: 3,
			RunAt: now, ResultTTL: time.Hour}
	}
	if _, err := st.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
		t.Fatal(err)
	}
	jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: n,
		LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(jobs) != n {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	fins := make([]*store.JobFinishParams, n)
	for i, j := range jobs {
		fins[i] = &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, FinishedAt: now}
	}
	return fins
}

// countingStore wraps the real store to count and optionally fail batches.
type countingStore struct {
	store.Store
	calls atomic.Int32
	fail  atomic.Int32 // fail this many calls first
	gate  chan struct{}
}

func (s *countingStore) JobFinishMany(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	s.calls.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	if s.fail.Add(-1) >= 0 {
		return nil, errors.New("injected failure")
	}
	return s.Store.JobFinishMany(ctx, p)
}

func TestCompleter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("writes every finish and reports the ids", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		var mu sync.Mutex
		var done []int64
		c := completer.New(st, &completer.Config{Finished: func(ids []int64) {
			mu.Lock()
			defer mu.Unlock()
			done = append(done, ids...)
		}})
		c.TestSignals.Flushed.Init()
		_ = c.Start(ctx)
		fins := claimed(t, st, 50)
		for _, f := range fins {
			c.Submit(f)
		}
		c.Stop()
		for _, f := range fins {
			row, err := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: f.ID})
			if err != nil || row.State != idemtype.StateCompleted {
				t.Fatalf("job %d: %v %v", f.ID, row, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(done)
		if len(done) != 50 || done[0] != fins[0].ID {
			t.Fatalf("reported %d ids", len(done))
		}
	})

	t.Run("gathers what is queued into one batch", func(t *testing.T) {
		t.Parallel()
		cs := &countingStore{Store: openStore(t), gate: make(chan struct{})}
		c := completer.New(cs, nil)
		_ = c.Start(ctx)
		fins := claimed(t, cs.Store, 200)
		// The store holds every call until the gate opens: the loops take
		// what is queued at most Loops times, the rest queues up behind them
		// and is gathered into a few batches.
		for _, f := range fins {
			c.Submit(f)
		}
		close(cs.gate)
		c.Stop()
		if calls := cs.calls.Load(); calls > 10 {
			t.Fatalf("%d store calls for %d finishes: not batched", calls, len(fins))
		}
	})

	t.Run("retries a failed batch", func(t *testing.T) {
		t.Parallel()
		cs := &countingStore{Store: openStore(t)}
		cs.fail.Store(2)
		c := completer.New(cs, nil)
		c.TestSignals.Flushed.Init()
		_ = c.Start(ctx)
		fins := claimed(t, cs.Store, 1)
		c.Submit(fins[0])
		if n := c.TestSignals.Flushed.WaitOrTimeout(t); n != 1 {
			t.Fatalf("flushed %d", n)
		}
		c.Stop()
		row, _ := cs.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: fins[0].ID})
		if row.State != idemtype.StateCompleted || cs.calls.Load() != 3 {
			t.Fatalf("state %s after %d calls", row.State, cs.calls.Load())
		}
	})

	t.Run("a lost lease is not reported finished", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		var reported atomic.Int32
		c := completer.New(st, &completer.Config{Finished: func(ids []int64) { reported.Add(int32(len(ids))) }})
		c.TestSignals.Flushed.Init()
		_ = c.Start(ctx)
		fins := claimed(t, st, 1)
		fins[0].LeaseToken = "wrong"
		c.Submit(fins[0])
		c.TestSignals.Flushed.WaitOrTimeout(t)
		c.Stop()
		if reported.Load() != 0 {
			t.Fatal("a refused finish was reported")
		}
	})

	t.Run("stop drains, is idempotent, and later submits are dropped", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		c := completer.New(st, nil)
		_ = c.Start(ctx)
		fins := claimed(t, st, 2)
		c.Submit(fins[0])
		c.Stop()
		c.Stop()
		<-c.Stopped()
		c.Submit(fins[1]) // dropped, does not block or panic
		row, _ := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: fins[1].ID})
		if row.State != idemtype.StateRunning {
			t.Fatalf("a finish after Stop was written: %s", row.State)
		}
	})

	t.Run("stop without start", func(t *testing.T) {
		t.Parallel()
		c := completer.New(openStore(t), nil)
		c.Stop()
		c.Stop()
	})

	t.Run("stop without start drops what was submitted", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		c := completer.New(st, nil)
		fins := claimed(t, st, 3)
		for _, f := range fins {
			c.Submit(f)
		}
		c.Stop() // returns: nothing waits for a runner that never started
		row, _ := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: fins[0].ID})
		if row.State != idemtype.StateRunning {
			t.Fatalf("written without Start: %s", row.State)
		}
	})

	t.Run("stop writes what was submitted while a batch runs", func(t *testing.T) {
		t.Parallel()
		cs := &countingStore{Store: openStore(t), gate: make(chan struct{})}
		c := completer.New(cs, nil)
		c.TestSignals.Flushed.Init()
		_ = c.Start(ctx)
		fins := claimed(t, cs.Store, 20)
		for _, f := range fins {
			c.Submit(f)
		}
		stopped := make(chan struct{})
		go func() { c.Stop(); close(stopped) }()
		close(cs.gate)
		<-stopped
		for _, f := range fins {
			row, _ := cs.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: f.ID})
			if row.State != idemtype.StateCompleted {
				t.Fatalf("job %d not written by Stop: %s", f.ID, row.State)
			}
		}
	})
}
