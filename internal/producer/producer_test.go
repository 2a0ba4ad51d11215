package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/completer"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func utcNow() time.Time { return time.Now().UTC() }

// bundle is a producer's world on a real SQLite store: executor, running
// registry, completer reporting finished ids on a channel.
type bundle struct {
	store     store.Store
	exec      *executor.Executor
	running   *producer.Running
	completer *completer.Completer
	finished  chan int64
	mu        sync.Mutex
	handlers  map[string]executor.Handler
}

func setup(t *testing.T) *bundle {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bundle{store: st, running: producer.NewRunning(), finished: make(chan int64, 1000),
		handlers: map[string]executor.Handler{}}
	b.exec, err = executor.New(&executor.Config{Store: st, Now: utcNow, LeaseDuration: time.Minute,
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(*idemtype.JobRow) time.Duration { return time.Hour },
		Handler: func(kind string) executor.Handler {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.handlers[kind]
		}})
	if err != nil {
		t.Fatal(err)
	}
	b.completer = completer.New(st, &completer.Config{Finished: func(ids []int64) {
		for _, id := range ids {
			b.finished <- id
		}
	}})
	_ = b.completer.Start(context.Background())
	t.Cleanup(b.completer.Stop)
	return b
}

func (b *bundle) handle(kind string, h executor.Handler) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handlers[kind] = h
}

func (b *bundle) producer(t *testing.T, workers int) *producer.Producer {
	t.Helper()
	p, err := producer.New(b.store, b.exec, b.running, b.completer.SubmitThen, &producer.Config{
		Queue: "q", MaxWorkers: workers, FetchLimit: 10, PollInterval: time.Hour, LeaseDuration: time.Minute,
		WorkerID: "w", Now: utcNow})
	if err != nil {
		t.Fatal(err)
	}
	p.TestSignals.Claimed.Init()
	t.Cleanup(p.Stop)
	return p
}

func (b *bundle) insert(t *testing.T, n int, kind string) []int64 {
	t.Helper()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Tenant: "t", Queue: "q", Kind: kind, Args: []byte("{}"), MaxAttempts: 3,
			RunAt: utcNow().Add(-time.Second), ResultTTL: time.Hour}
	}
	res, err := b.store.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: ps, Now: utcNow()})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids
}

// waitFinished waits until n finishes were written.
func (b *bundle) waitFinished(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case <-b.finished:
		case <-timeout:
			t.Fatalf("fewer than %d finishes written", n)
		}
	}
}

func TestProducer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ok := func(context.Context, *idemtype.JobRow) (json.RawMessage, error) { return json.RawMessage(`1`), nil }

	t.Run("claims and completes what is queued at start", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.handle("k", ok)
		ids := b.insert(t, 25, "k")
		p := b.producer(t, 4)
		_ = p.Start(ctx)
		b.waitFinished(t, len(ids))
		for _, id := range ids {
			row, err := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: id})
			if err != nil || row.State != idemtype.StateCompleted {
				t.Fatalf("job %d: %v %v", id, row.State, err)
			}
		}
	})

	t.Run("wakes for jobs inserted later", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.handle("k", ok)
		p := b.producer(t, 2)
		_ = p.Start(ctx)
		if n := p.TestSignals.Claimed.WaitOrTimeout(t); n != 0 {
			t.Fatalf("first claim took %d jobs of an empty queue", n)
		}
		b.insert(t, 1, "k")
		p.Wake() // the poll interval is an hour: only the wake-up finds it
		b.waitFinished(t, 1)
	})

	t.Run("never runs more than MaxWorkers at once", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var mu sync.Mutex
		active, peak := 0, 0
		release := make(chan struct{})
		b.handle("k", func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
			mu.Lock()
			active++
			peak = max(peak, active)
			mu.Unlock()
			<-release
			mu.Lock()
			active--
			mu.Unlock()
			return nil, nil
		})
		ids := b.insert(t, 9, "k")
		p := b.producer(t, 3)
		_ = p.Start(ctx)
		if n := p.TestSignals.Claimed.WaitOrTimeout(t); n != 3 {
			t.Fatalf("first claim took %d, want 3", n)
		}
		if got := b.running.Len(); got > 3 {
			t.Fatalf("%d running", got)
		}
		close(release)
		b.waitFinished(t, len(ids))
		mu.Lock()
		defer mu.Unlock()
		if peak > 3 {
			t.Fatalf("peak %d workers", peak)
		}
	})

	t.Run("a cancelled job's finish is dropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		started := make(chan int64, 1)
		b.handle("k", func(ctx context.Context, row *idemtype.JobRow) (json.RawMessage, error) {
			started <- row.ID
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		b.insert(t, 1, "k")
		p := b.producer(t, 1)
		_ = p.Start(ctx)
		id := <-started
		cause := errors.New("cancelled by test")
		b.running.Cancel(id, cause)
		b.running.Wait()
		row, _ := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: id})
		if row.State != idemtype.StateRunning {
			t.Fatalf("a dropped finish was written: %s", row.State)
		}
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, cfg := range map[string]*producer.Config{
		"no queue":      {MaxWorkers: 1, FetchLimit: 1, PollInterval: time.Second, LeaseDuration: time.Minute, Now: utcNow},
		"no workers":    {Queue: "q", FetchLimit: 1, PollInterval: time.Second, LeaseDuration: time.Minute, Now: utcNow},
		"no poll":       {Queue: "q", MaxWorkers: 1, FetchLimit: 1, LeaseDuration: time.Minute, Now: utcNow},
		"no clock":      {Queue: "q", MaxWorkers: 1, FetchLimit: 1, PollInterval: time.Second, LeaseDuration: time.Minute},
		"no fetch size": {Queue: "q", MaxWorkers: 1, PollInterval: time.Second, LeaseDuration: time.Minute, Now: utcNow},
		"no lease":      {Queue: "q", MaxWorkers: 1, FetchLimit: 1, PollInterval: time.Second, Now: utcNow},
	} {
		if _, err := producer.New(b.store, b.exec, b.running, b.completer.SubmitThen, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := producer.New(b.store, nil, b.running, b.completer.SubmitThen, &producer.Config{}); err == nil {
		t.Error("no executor: accepted")
	}
}

func TestRunningAndHeartbeater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	release := make(chan struct{})
	started := make(chan int64, 2)
	b.handle("k", func(ctx context.Context, row *idemtype.JobRow) (json.RawMessage, error) {
		started <- row.ID
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	ids := b.insert(t, 2, "k")
	p := b.producer(t, 2)
	_ = p.Start(ctx)
	<-started
	<-started
	h := producer.NewHeartbeater(b.store, b.running, &producer.HeartbeaterConfig{LeaseDuration: time.Hour})
	h.TestSignals.Renewed.Init()
	if n := h.RunOnce(ctx); n != 2 {
		t.Fatalf("renewed %d leases", n)
	}
	row, _ := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: ids[0]})
	if row.LeaseExpiresAt == nil || time.Until(*row.LeaseExpiresAt) < 50*time.Minute {
		t.Fatalf("lease not extended: %v", row.LeaseExpiresAt)
	}
	// Cancel one job in the store: the next heartbeat finds its lease lost
	// and cancels its handler.
	if _, err := b.store.JobCancel(ctx, &store.JobCancelParams{Tenant: "t", ID: ids[1], Reason: "test", Now: utcNow()}); err != nil {
		t.Fatal(err)
	}
	_ = h.Start(ctx)
	h.Stop() // Start then Stop at once: the loop exits cleanly
	h.RunOnce(ctx)
	if h.TestSignals.Renewed.WaitOrTimeout(t) != 2 {
		t.Fatal("first run signal")
	}
	leases := b.running.Leases()
	if len(leases) != 1 || leases[0].ID != ids[0] {
		t.Fatalf("leases after a lost one: %v", leases)
	}
	if released := b.running.Release(); len(released) != 1 {
		t.Fatalf("released %v", released)
	}
	if len(b.running.Leases()) != 0 {
		t.Fatal("leases after Release")
	}
	close(release)
	b.running.Wait()
}
