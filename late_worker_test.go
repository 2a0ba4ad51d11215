package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// TestWorkersRegisteredAfterStartAreClaimed (both stores): a worker
// registered after Client.Start is worked: a job of its kind enqueued
// before the registration (found by the next poll) and jobs of kinds
// registered concurrently with the producer's claims, each enqueued after
// its registration. The producer's kind list was fixed at Start, so such
// jobs stayed available forever.
func TestWorkersRegisteredAfterStartAreClaimed(t *testing.T) {
	t.Parallel()
	bothBundles(t, func() *idem.Config {
		return &idem.Config{Queues: queues(4), PollInterval: 10 * time.Millisecond, DisableMaintenance: true}
	}, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		b.start(t)
		early, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "late", Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		handler := func(_ context.Context, row *idem.JobRow) (json.RawMessage, error) {
			return json.Marshal(row.Kind)
		}
		b.workers.Handle("late", handler)
		const kinds = 8
		ids := make([]int64, kinds)
		startTogether(kinds, func(g int) {
			kind := fmt.Sprint("late-", g)
			b.workers.Handle(kind, handler)
			res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: kind, Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
			if err != nil {
				t.Error(err)
				return
			}
			ids[g] = res.Job.ID
		})
		if t.Failed() {
			return
		}
		for _, row := range waitAll(t, b.client, append(ids, early.Job.ID), waitTimeout) {
			if row.State != idem.StateCompleted || string(row.Result) != fmt.Sprintf("%q", row.Kind) {
				t.Errorf("job %d (%s) %s with %s, want completed with its kind", row.ID, row.Kind, row.State, row.Result)
			}
		}
	})
}

// kindsGate is a real store that reports the kinds of each job claim (on
// entered, before the claim runs, and on returned, after) and, while hold
// is set, holds each claim until it is closed.
type kindsGate struct {
	store.Store
	entered  chan []string
	returned chan []string
	hold     atomic.Pointer[chan struct{}]
}

func (g *kindsGate) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	select {
	case g.entered <- p.Kinds:
	default:
	}
	if hold := g.hold.Load(); hold != nil {
		select {
		case <-*hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	jobs, err := g.Store.JobClaim(ctx, p)
	select {
	case g.returned <- p.Kinds:
	default:
	}
	return jobs, err
}

// TestRegisteringAWorkerWakesTheQueue (both stores): a worker registered
// after Client.Start for a kind whose job is already waiting runs it at
// once, though the queue polls once an hour: the registration wakes the
// queue's producer as an insert does. Also when it comes while a claim
// that read the kinds before it is under way ("during a claim"): that
// claim is followed by another. The job used to wait for the next poll.
func TestRegisteringAWorkerWakesTheQueue(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"idle", "during a claim"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			bothRawStores(t, func(t *testing.T, raw store.Store) {
				testRegisteringWakes(t, raw, when == "during a claim")
			})
		})
	}
}

func testRegisteringWakes(t *testing.T, raw store.Store, duringClaim bool) {
	ctx := t.Context()
	// Without the store's announcements (a kindsGate is no Listener): only
	// the poll, an hour away, or a wake-up here starts a claim.
	g := &kindsGate{Store: raw, entered: make(chan []string, 64), returned: make(chan []string, 64)}
	hold := make(chan struct{})
	if duringClaim {
		g.hold.Store(&hold)
	}
	workers := idem.NewWorkers()
	noop := func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil }
	workers.Handle("other", noop) // so that the queue claims, for other jobs
	b := &bundle{workers: workers}
	var err error
	b.client, err = idem.NewClient(g, &idem.Config{Workers: workers, Queues: queues(4), PollInterval: time.Hour,
		DisableMaintenance: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "late", Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	// The first claim, for the other kind only, has read the kinds.
	if kinds := <-g.entered; fmt.Sprint(kinds) != "[other]" {
		t.Fatalf("first claim for kinds %v, want [other]", kinds)
	}
	if !duringClaim {
		<-g.returned // and the queue waits for its next poll
	}
	ran := make(chan struct{})
	workers.Handle("late", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		close(ran)
		return nil, nil
	})
	if duringClaim {
		g.hold.Store(nil)
		close(hold)
	}
	const promptly = 10 * time.Second // far below the hour of the poll
	select {
	case <-ran:
	case <-time.After(promptly):
		t.Fatalf("job %d of a kind registered after Start not run within %v (the queue polls every hour)", res.Job.ID, promptly)
	}
	if row := waitState(t, b, res.Job.ID, idem.StateCompleted); row.Attempt != 1 {
		t.Fatalf("job %d completed at attempt %d, want 1", row.ID, row.Attempt)
	}
}

// TestRegisteringAWorkerWhileAQueueReadsItsKinds (both stores): a worker
// registered while a producer is between reading the kind list (empty: no
// worker yet, so it claims nothing) and waiting for its next wake-up runs
// its waiting job at once, though the queue polls once an hour. The
// producer is held just after its read (Workers' test hook) while the
// kind is registered, so the registration's wake-up comes before the
// producer waits: it must be kept until then, and the next read sees the
// kind (registered before its wake-up).
func TestRegisteringAWorkerWhileAQueueReadsItsKinds(t *testing.T) {
	t.Parallel()
	bothRawStores(t, func(t *testing.T, raw store.Store) {
		ctx := t.Context()
		// Without the store's announcements (a kindsGate is no Listener):
		// only the poll, an hour away, or a wake-up starts a claim.
		g := &kindsGate{Store: raw, entered: make(chan []string, 64), returned: make(chan []string, 64)}
		workers := idem.NewWorkers()
		read, release := make(chan []string, 1), make(chan struct{})
		var held atomic.Bool
		idem.OnKindsRead(workers, func(kinds []string) {
			if len(kinds) == 0 && held.CompareAndSwap(false, true) {
				read <- kinds
				<-release
			}
		})
		client, err := idem.NewClient(g, &idem.Config{Workers: workers, Queues: queues(4), PollInterval: time.Hour,
			DisableMaintenance: true, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		b := &bundle{client: client, workers: workers}
		res, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "late", Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		b.start(t)
		select {
		case <-read: // the producer read the empty list and is held
		case <-time.After(waitTimeout):
			t.Fatal("the producer did not read its kinds")
		}
		ran := make(chan struct{})
		workers.Handle("late", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			close(ran)
			return nil, nil
		})
		close(release)
		const promptly = 10 * time.Second // far below the hour of the poll
		select {
		case <-ran:
		case <-time.After(promptly):
			t.Fatalf("job %d of a kind registered while the queue read its kinds not run within %v (the queue polls every hour)", res.Job.ID, promptly)
		}
		if row := waitState(t, b, res.Job.ID, idem.StateCompleted); row.Attempt != 1 {
			t.Fatalf("job %d completed at attempt %d, want 1", row.ID, row.Attempt)
		}
	})
}
