package idem_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// keyGate is a store whose claimed jobs take their key's lease through
// RecordAcquireMany (as a job whose record stores a lease does: KeyHeld
// false), and whose key acquires wait until open is closed; entered hears
// of each waiting call. Everything else is the real store's.
type keyGate struct {
	store.Store
	entered chan struct{}
	open    chan struct{}
}

// newKeyGate wraps raw in a keyGate and returns it with release, which lets
// the held RecordAcquireMany through (once: call it again, deferred, so
// that a failing test does not leave the acquire blocked).
func newKeyGate(raw store.Store) (st *keyGate, release func()) {
	st = &keyGate{Store: raw, entered: make(chan struct{}, 1), open: make(chan struct{})}
	var once sync.Once
	return st, func() { once.Do(func() { close(st.open) }) }
}

// waitEntered waits until a claimed job's key acquire is held, failing
// after leaseTimeout.
func (s *keyGate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(leaseTimeout):
		t.Fatal("the claimed job never took its key")
	}
}

func (s *keyGate) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	jobs, err := s.Store.JobClaim(ctx, p)
	for _, j := range jobs {
		j.KeyHeld = false
	}
	return jobs, err
}

func (s *keyGate) RecordAcquireMany(ctx context.Context, ps []*store.RecordAcquireParams) ([]*store.RecordAcquireResult, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.open
	return s.Store.RecordAcquireMany(ctx, ps)
}

// TestCancelBeforeTheHandlerStartsRunsNothing: a job cancelled after its
// claim while its key's lease is being taken (a slow store) is cancelled
// before its handler starts; the handler must then not start at all. Before
// the fix the executor called the handler anyway, with a context already
// cancelled: a handler that does its work without looking at its context
// (sends the mail) worked a job that JobCancel had reported cancelled. The
// same gap let a run whose lease was lost meanwhile (the job rescued and
// running elsewhere) start its handler here too.
func TestCancelBeforeTheHandlerStartsRunsNothing(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			raw, _ := openLeaseStore(t, kind)
			st, release := newKeyGate(raw)
			defer release() // on failure: let the acquire through
			c, id, starts := startCancelMe(t, st, &idem.EnqueueOpts{IdempotencyKey: "cancel-before-start"})
			st.waitEntered(t)
			cancelHeld(t, c, raw, id, release, starts, "before it started")
		})
	}
}

// claimGate is a store whose claims, once committed, wait until open is
// closed before they return their jobs to the producer; claimed hears of
// each such claim (its jobs are running in the store, but the producer has
// not registered them yet). Everything else is the real store's.
type claimGate struct {
	store.Store
	claimed chan []*idem.JobRow
	open    chan struct{}
}

// newClaimGate is a closed claimGate on raw that hears of up to n claims
// without blocking; release opens it (again: a no-op).
func newClaimGate(raw store.Store, n int) (st *claimGate, release func()) {
	st = &claimGate{Store: raw, claimed: make(chan []*idem.JobRow, n), open: make(chan struct{})}
	var open sync.Once
	return st, func() { open.Do(func() { close(st.open) }) }
}

func (s *claimGate) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	jobs, err := s.Store.JobClaim(ctx, p)
	if err == nil && len(jobs) > 0 {
		s.claimed <- jobs
		<-s.open
	}
	return jobs, err
}

// TestCancelBetweenClaimAndRegistrationRunsNothing: a job cancelled in
// this process after its claim committed but before the producer
// registered it (the claim's answer on its way back) must not start its
// handler: JobCancel promises a running job's handler is cancelled at once
// in this process. Before the fix Running.Cancel found nothing registered
// and forgot the cancel, so the handler ran in full (only the next
// heartbeat, a third of the lease later, could have stopped it).
func TestCancelBetweenClaimAndRegistrationRunsNothing(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, _ := openLeaseStore(t, kind)
			st, release := newClaimGate(raw, 1)
			defer release() // on failure: let the claim through
			c, id, starts := startCancelMe(t, st, nil)
			select {
			case jobs := <-st.claimed:
				if len(jobs) != 1 || jobs[0].ID != id {
					t.Fatalf("claimed %d jobs, want job %d", len(jobs), id)
				}
			case <-time.After(leaseTimeout):
				t.Fatal("the job was never claimed")
			}
			cancelHeld(t, c, raw, id, release, starts, "between its claim and its registration")
			as, err := c.JobAttempts(ctx, "", id)
			if err != nil {
				t.Fatal(err)
			}
			if len(as) != 1 || as[0].Outcome != idemtype.OutcomeCancelled {
				t.Fatalf("attempts %+v, want one cancelled", as)
			}
		})
	}
}

// TestCancelledThenRetriedJobRunsHere: a job cancelled while it ran
// nowhere, then retried, runs when this process claims it again: what
// JobCancel remembers of a job it could not reach concerns the claim it
// voided only.
func TestCancelledThenRetriedJobRunsHere(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, _ := openLeaseStore(t, kind)
			ran := make(chan int64, 1)
			workers := idem.NewWorkers()
			workers.Handle("later", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
				ran <- j.ID
				return json.RawMessage(`"ok"`), nil
			})
			c, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(),
				LeaseDuration: 30 * time.Second, PollInterval: 20 * time.Millisecond, DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			// Scheduled far ahead: no claim can take it before the cancel.
			res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "later",
				Opts: &idem.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Stop(context.Background()) })
			if _, err := c.JobCancel(ctx, "", res.Job.ID); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if _, err := c.JobRetry(ctx, "", res.Job.ID, time.Time{}); err != nil {
				t.Fatalf("retry: %v", err)
			}
			select {
			case id := <-ran:
				if id != res.Job.ID {
					t.Fatalf("ran job %d, want %d", id, res.Job.ID)
				}
			case <-time.After(leaseTimeout):
				t.Fatal("the retried job never ran")
			}
		})
	}
}

// startCancelMe starts a client on st (startShutdownClient, 30-second
// leases) whose "cancel-me" handler counts its starts in starts, and
// enqueues a "cancel-me" job with opts.
func startCancelMe(t *testing.T, st store.Store, opts *idem.EnqueueOpts) (c *idem.Client, id int64, starts *atomic.Int32) {
	t.Helper()
	starts = new(atomic.Int32)
	workers := idem.NewWorkers()
	workers.Handle("cancel-me", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		starts.Add(1)
		return json.RawMessage(`"sent"`), nil
	})
	c = startShutdownClient(t, st, workers, 30*time.Second)
	res, err := c.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "cancel-me", Opts: opts})
	if err != nil {
		t.Fatal(err)
	}
	return c, res.Job.ID, starts
}

// cancelHeld cancels job id while a store wrapper holds its run back,
// lets the wrapper go (release), stops the client (which waits for the
// job's executor) and fails unless the job is cancelled and its handler
// never started (starts); when names the moment of the cancel.
func cancelHeld(t *testing.T, c *idem.Client, raw store.Store, id int64, release func(), starts *atomic.Int32, when string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.JobCancel(ctx, "", id); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	release()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	row, err := raw.JobGet(ctx, &store.JobGetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if n := starts.Load(); n != 0 || row.State != idem.StateCancelled {
		t.Fatalf("the handler of a job cancelled %s ran %d times; the job is %s", when, n, row.State)
	}
}
