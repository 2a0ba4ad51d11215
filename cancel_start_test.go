package idem_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
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
			ctx := context.Background()
			raw, _ := openLeaseStore(t, kind)
			st := &keyGate{Store: raw, entered: make(chan struct{}, 1), open: make(chan struct{})}
			var open sync.Once
			defer open.Do(func() { close(st.open) }) // on failure: let the acquire through
			var starts atomic.Int32
			workers := idem.NewWorkers()
			workers.Handle("cancel-me", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				starts.Add(1)
				return json.RawMessage(`"sent"`), nil
			})
			c := startShutdownClient(t, st, workers, 30*time.Second)
			res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "cancel-me",
				Opts: &idem.EnqueueOpts{IdempotencyKey: "cancel-before-start"}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-st.entered:
			case <-time.After(leaseTimeout):
				t.Fatal("the claimed job never took its key")
			}
			if _, err := c.JobCancel(ctx, "", res.Job.ID); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			open.Do(func() { close(st.open) })
			if err := c.Stop(ctx); err != nil { // waits for the job's executor
				t.Fatalf("stop: %v", err)
			}
			row, err := raw.JobGet(ctx, &store.JobGetParams{ID: res.Job.ID})
			if err != nil {
				t.Fatal(err)
			}
			if n := starts.Load(); n != 0 || row.State != idem.StateCancelled {
				t.Fatalf("the handler of a job cancelled before it started ran %d times; the job is %s", n, row.State)
			}
		})
	}
}
