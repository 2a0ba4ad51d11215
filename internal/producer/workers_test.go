package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/store"
)

// TestFreedWorkerClaimsOnlyItsSlot: with every worker busy, each handler
// that returns frees exactly one slot, so the claim it wakes takes exactly
// one job, however many are queued. 2 workers, a fetch limit of 10 and 6
// jobs: the claims take 2, then 1 per finished job, so no more than 2
// handlers ever run at once. The handlers are released one at a time,
// each only after the previous claim has been seen, so the sizes are
// exact. (Kills the overcount of free workers, `MaxWorkers + active`,
// which lets a freed slot claim 3.)
func TestFreedWorkerClaimsOnlyItsSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const workers, jobs = 2, 6
	started := make(chan int64, jobs)
	var mu sync.Mutex
	release := map[int64]chan struct{}{}
	gate := func(id int64) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if release[id] == nil {
			release[id] = make(chan struct{})
		}
		return release[id]
	}
	b.handle("k", func(_ context.Context, row *idemtype.JobRow) (json.RawMessage, error) {
		started <- row.ID
		<-gate(row.ID)
		return nil, nil
	})
	b.insert(t, jobs, "k")
	p := b.producer(t, workers)
	_ = p.Start(ctx)
	if n := p.TestSignals.Claimed.WaitOrTimeout(t); n != workers {
		t.Fatalf("first claim took %d, want %d", n, workers)
	}
	var running []int64
	for range workers {
		running = append(running, <-started)
	}
	for claimed := workers; claimed < jobs; claimed++ {
		close(gate(running[0])) // one handler returns: one slot frees
		running = running[1:]
		if n := p.TestSignals.Claimed.WaitOrTimeout(t); n != 1 {
			t.Fatalf("a freed worker claimed %d jobs, want 1 (after %d claimed)", n, claimed)
		}
		running = append(running, <-started)
	}
	for _, id := range running {
		close(gate(id))
	}
	b.waitFinished(t, jobs)
}

// deadlineStore is the real store, recording the deadline of the context
// each heartbeat call gets.
type deadlineStore struct {
	store.Store
	deadlines chan time.Duration // time left before the deadline at the call
}

func (s *deadlineStore) JobHeartbeatMany(ctx context.Context, p *store.JobHeartbeatParams) ([]error, error) {
	d, ok := ctx.Deadline()
	if !ok {
		s.deadlines <- -1
	} else {
		s.deadlines <- time.Until(d)
	}
	return s.Store.JobHeartbeatMany(ctx, p)
}

// TestHeartbeatCallBoundedByAThirdOfTheLease: a renewal call may take at
// most a third of the lease (the renewal interval), so a hanging store call
// cannot hold the next renewals back past the lease. The heartbeat reaches
// the store with a deadline of at most LeaseDuration/3.
func TestHeartbeatCallBoundedByAThirdOfTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	b.handle("k", func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
		started <- struct{}{}
		<-release
		return nil, nil
	})
	b.insert(t, 1, "k")
	p := b.producer(t, 1)
	_ = p.Start(ctx)
	<-started
	const lease = 3 * time.Hour
	st := &deadlineStore{Store: b.store, deadlines: make(chan time.Duration, 1)}
	h := producer.NewHeartbeater(st, b.running, &producer.HeartbeaterConfig{LeaseDuration: lease})
	if n := h.RunOnce(ctx); n != 1 {
		t.Fatalf("renewed %d leases, want 1", n)
	}
	if d := <-st.deadlines; d <= 0 || d > lease/3 {
		t.Fatalf("heartbeat call had %v before its deadline, want (0, %v]", d, lease/3)
	}
	close(release)
	b.waitFinished(t, 1)
}

// TestFinishedJobsLeaveTheRegistry: once their finishes are written, jobs
// leave Running — nothing left to heartbeat or to release at shutdown.
// (Kills `r.jobs[id] == j` negated in Running.remove, which kept every
// finished job registered and heartbeated.)
func TestFinishedJobsLeaveTheRegistry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.handle("k", func(context.Context, *idemtype.JobRow) (json.RawMessage, error) { return nil, nil })
	b.insert(t, 3, "k")
	p := b.producer(t, 2)
	_ = p.Start(context.Background())
	b.waitFinished(t, 3)
	p.Stop()
	b.completer.Stop() // returns once every written callback has run
	b.running.Wait()
	if n := b.running.Len(); n != 0 {
		t.Fatalf("%d jobs still registered after their finishes were written", n)
	}
	if l := b.running.Leases(); len(l) != 0 {
		t.Fatalf("leases still renewed after the finishes were written: %v", l)
	}
}

// TestLostLeaseCancelsItsHandler: a heartbeat that finds a job's lease lost
// (the job was cancelled in the store) cancels that job's handler with
// ErrLeaseLost, and its finish is dropped; CancelLease naming another token
// of the job (an older claim) does nothing. (Kills `j != nil` negated in
// CancelLease: the handler ran on, and a stale lease dereferenced nil.)
func TestLostLeaseCancelsItsHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	causes := make(chan error, 1)
	b.handle("k", func(ctx context.Context, row *idemtype.JobRow) (json.RawMessage, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	})
	id := b.insert(t, 1, "k")[0]
	p := b.producer(t, 1)
	_ = p.Start(ctx)
	if n := p.TestSignals.Claimed.WaitOrTimeout(t); n != 1 {
		t.Fatalf("claimed %d, want 1", n)
	}
	b.running.CancelLease(store.Lease{ID: id, Token: "an older claim's token"}, errors.New("stale"))
	if l := b.running.Leases(); len(l) != 1 {
		t.Fatalf("a stale lease's cancel touched the running job: leases %v", l)
	}
	if _, err := b.store.JobCancel(ctx, &store.JobCancelParams{Tenant: "t", ID: id, Reason: "test", Now: utcNow()}); err != nil {
		t.Fatal(err)
	}
	h := producer.NewHeartbeater(b.store, b.running, &producer.HeartbeaterConfig{LeaseDuration: time.Hour})
	h.RunOnce(ctx)
	select {
	case cause := <-causes:
		if !errors.Is(cause, idemtype.ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v, want ErrLeaseLost", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler of a job whose lease was lost was not cancelled")
	}
	b.running.Wait()
	if row, _ := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: id}); row.State != idemtype.StateCancelled {
		t.Fatalf("job %s, want cancelled (the lost attempt's finish dropped)", row.State)
	}
}
