package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/store"
)

// TestShutdownAsHandlerReturnsKeepsTheResult: a shutdown whose deadline
// passes just as a handler returns (here: right after the producer decided
// to keep the outcome, before the finish reached the completer) must not
// release the job: its finish is written and it completes in attempt 1.
// Before the fix, "is it lost" and "finishing" were two steps of the
// registry, so Release gave this lease back in between: the finish was
// refused as lease-lost and the completed job was run again.
func TestShutdownAsHandlerReturnsKeepsTheResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.handle("k", func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
		return json.RawMessage(`"done"`), nil
	})
	ids := b.insert(t, 1, "k")
	p := b.producer(t, 1)
	released := make(chan int, 1)
	producer.SetKeptHook(p, func(*idemtype.JobRow) {
		// What Client.Stop does at its deadline.
		leases := b.running.Release()
		if len(leases) > 0 {
			if _, err := b.store.JobReleaseMany(ctx, &store.JobReleaseManyParams{Leases: leases, Now: utcNow()}); err != nil {
				t.Errorf("release: %v", err)
			}
		}
		released <- len(leases)
	})
	_ = p.Start(ctx)
	select {
	case n := <-released:
		if n != 0 {
			t.Errorf("shutdown released %d leases of a job whose outcome was kept", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never returned")
	}
	b.running.Wait()
	b.completer.Stop() // drains: the finish is written or refused
	row, err := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idemtype.StateCompleted || row.Attempt != 1 {
		t.Fatalf("state %s attempt %d, want completed in attempt 1 (its result kept)", row.State, row.Attempt)
	}
}

// cutClaimStore is the real store whose JobClaim answers as PostgreSQL does
// when the claim's context is cancelled while its commit succeeds: the jobs
// are claimed in the database, and the call reports the cancellation. The
// first claim waits for proceed (the test cancels the producer meanwhile).
type cutClaimStore struct {
	store.Store
	once     sync.Once
	inFlight chan struct{}
	proceed  chan struct{}
}

func (s *cutClaimStore) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	s.once.Do(func() {
		close(s.inFlight)
		<-s.proceed
	})
	jobs, err := s.Store.JobClaim(context.WithoutCancel(ctx), p)
	if err == nil && ctx.Err() != nil {
		return nil, fmt.Errorf("claim committed, acknowledgement lost: %w", ctx.Err())
	}
	return jobs, err
}

// TestStopDuringClaimStrandsNothing: a producer stopped while its claim is in
// flight does not leave the claimed jobs running in the store with nobody
// executing them (until the rescuer takes them back, using an attempt). The
// claim is not cut off by Stop; what it returns while stopping is released
// (attempt given back), so any process can take it at once.
func TestStopDuringClaimStrandsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.handle("k", func(context.Context, *idemtype.JobRow) (json.RawMessage, error) { return nil, nil })
	ids := b.insert(t, 1, "k")
	st := &cutClaimStore{Store: b.store, inFlight: make(chan struct{}), proceed: make(chan struct{})}
	p, err := producer.New(st, b.exec, b.running, b.completer.SubmitThen, &producer.Config{
		Queue: "q", MaxWorkers: 1, FetchLimit: 10, PollInterval: time.Hour, LeaseDuration: time.Minute,
		WorkerID: "w", Now: utcNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_ = p.Start(pctx)
	select {
	case <-st.inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("the producer never claimed")
	}
	cancel() // cancelling Start's context stops the producer as Stop does
	close(st.proceed)
	p.Stop()
	b.running.Wait()
	row, err := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idemtype.StateAvailable || row.Attempt != 0 {
		t.Fatalf("after a claim cut off by Stop the job is %s in attempt %d (%d running here), want available in attempt 0 (released)",
			row.State, row.Attempt, b.running.Len())
	}
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestReclaimCancelsTheLostRun: when this process claims again a job whose
// lease it lost (the lease expired, the rescuer took it back, this same
// producer claimed it anew), the old run's handler is cancelled with
// ErrLeaseLost; it does not go on running beside the new one. Before the
// fix the registry, keyed by job id, forgot the old run when the new one
// registered: nothing ever cancelled it.
func TestReclaimCancelsTheLostRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	clock := &manualClock{now: utcNow()}
	started := make(chan int, 2)
	firstEnded := make(chan error, 1)
	testDone := make(chan struct{})
	var mu sync.Mutex
	runs := 0
	b.handle("k", func(ctx context.Context, _ *idemtype.JobRow) (json.RawMessage, error) {
		mu.Lock()
		runs++
		n := runs
		mu.Unlock()
		started <- n
		if n > 1 {
			return json.RawMessage(`"second"`), nil
		}
		select {
		case <-ctx.Done():
			firstEnded <- context.Cause(ctx)
			return nil, ctx.Err()
		case <-testDone: // the test gave up: end so that nothing leaks
			return nil, errors.New("never cancelled")
		}
	})
	ids := b.insert(t, 1, "k")
	p, err := producer.New(b.store, b.exec, b.running, b.completer.SubmitThen, &producer.Config{
		Queue: "q", MaxWorkers: 2, FetchLimit: 10, PollInterval: time.Hour, LeaseDuration: time.Minute,
		WorkerID: "w", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	t.Cleanup(func() { close(testDone) })
	wait := func(what string) int {
		t.Helper()
		select {
		case n := <-started:
			return n
		case <-time.After(30 * time.Second):
			t.Fatalf("%s never started", what)
			return 0
		}
	}
	_ = p.Start(ctx)
	wait("the first run")
	// No heartbeats here: the lease expires, the rescuer takes the job back.
	clock.Add(2 * time.Minute)
	rescued, err := b.store.JobRescue(ctx, &store.JobRescueParams{Now: clock.Now(), Limit: 10})
	if err != nil || len(rescued) != 1 || rescued[0].ID != ids[0] {
		t.Fatalf("rescued %v (%v), want job %d", rescued, err, ids[0])
	}
	p.Wake()
	if n := wait("the second run"); n != 2 {
		t.Fatalf("run %d started, want the second", n)
	}
	select {
	case cause := <-firstEnded:
		if !errors.Is(cause, idemtype.ErrLeaseLost) {
			t.Fatalf("the first run ended with %v, want the lease-lost cause", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first run of the job is still running beside the second: its lost lease never cancelled it")
	}
	b.waitFinished(t, 1) // the second run's finish
	row, err := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idemtype.StateCompleted || string(row.Result) != `"second"` {
		t.Fatalf("state %s result %s, want completed by the second run", row.State, row.Result)
	}
}
