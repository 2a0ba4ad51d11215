package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestObserverSeesDo: Do reports its cache miss and then its hit.
func TestObserverSeesDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	obs := &countingObserver{counts: map[idem.EventType]int{}}
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := client.Do(ctx, "report-1", func(context.Context) (any, error) { return 1, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	if obs.counts[idem.EventCacheMiss] != 1 || obs.counts[idem.EventCacheHit] != 1 {
		t.Fatalf("events %v", obs.counts)
	}
}

// abandonLease claims the one job of queue mail with a 1 s lease nobody
// renews, moves offset (client's clock) a minute on, so that the lease is
// long expired, and starts client; the caller defers the returned stop
// (before its store closes).
func abandonLease(ctx context.Context, t *testing.T, client *idem.Client, offset *atomic.Int64) (stop func()) {
	t.Helper()
	if jobs, err := client.Claim(ctx, idem.ClaimParams{Queues: []string{"mail"}, WorkerID: "w", Lease: time.Second}); err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	offset.Store(int64(time.Minute))
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		client.Stop(sctx)
	}
}

// rescueObserver signals every rescued job.
type rescueObserver struct{ rescued chan *idem.JobEvent }

func (o *rescueObserver) ObserveJob(e *idem.JobEvent) {
	if e.Type == idem.EventRescued {
		o.rescued <- e
	}
}

// TestObserverSeesRescue: a job whose lease expires is reported rescued,
// with its queue and kind, by the maintenance leader.
func TestObserverSeesRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	obs := &rescueObserver{rescued: make(chan *idem.JobEvent, 4)}
	client, err := idem.NewClient(st, &idem.Config{Now: now, Observer: obs, RescueInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, SendArgs{To: "ada@example.com"}, &idem.EnqueueOpts{Queue: "mail"}); err != nil {
		t.Fatal(err)
	}
	defer abandonLease(ctx, t, client, &offset)()
	select {
	case e := <-obs.rescued:
		if e.Queue != "mail" || e.Kind != (SendArgs{}).Kind() || e.JobID == 0 {
			t.Fatalf("rescued event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no rescued event")
	}
}

// finishObserver records every event and signals each finished one.
type finishObserver struct {
	mu       sync.Mutex
	events   []idem.JobEvent
	finished chan struct{}
}

func (o *finishObserver) ObserveJob(e *idem.JobEvent) {
	o.mu.Lock()
	o.events = append(o.events, *e)
	o.mu.Unlock()
	if e.Type == idem.EventFinished {
		o.finished <- struct{}{}
	}
}

// TestObserverSeesEveryAttempt: a worker reports each job's enqueue,
// claim and finished attempt with the attempt's state, outcome, error and
// whether the handler panicked; a repeated key is reported deduplicated.
func TestObserverSeesEveryAttempt(t *testing.T) {
	t.Parallel()
	obs := &finishObserver{finished: make(chan struct{}, 16)}
	workers := idem.NewWorkers()
	workers.Handle("ok", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	workers.Handle("fails", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, errors.New("upstream down") })
	workers.Handle("permanent", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		return nil, idem.JobPermanent(errors.New("bad input"))
	})
	workers.Handle("panics", func(context.Context, *idem.JobRow) (json.RawMessage, error) { panic("boom") })
	b := setup(t, &idem.Config{Workers: workers, Queues: queues(4), Observer: obs, PollInterval: 10 * time.Millisecond, DisableMaintenance: true,
		Retry: idem.RetryPolicy{Delays: []time.Duration{time.Hour}, Jitter: -1}})
	ctx := context.Background()
	ids := map[string]int64{}
	for _, kind := range []string{"ok", "fails", "permanent", "panics"} {
		res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: kind, Opts: &idem.EnqueueOpts{MaxAttempts: 3, IdempotencyKey: "k-" + kind}})
		if err != nil {
			t.Fatal(err)
		}
		ids[kind] = res.Job.ID
	}
	if _, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ok", Opts: &idem.EnqueueOpts{MaxAttempts: 3, IdempotencyKey: "k-ok"}}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	for range 4 {
		select {
		case <-obs.finished:
		case <-time.After(waitTimeout):
			t.Fatal("four attempts did not finish")
		}
	}
	want := map[string]struct {
		state    idem.JobState
		outcome  idemtype.Outcome
		err      string
		panicked bool
	}{
		"ok":        {idem.StateCompleted, idemtype.OutcomeCompleted, "", false},
		"fails":     {idem.StateRetryable, idemtype.OutcomeFailed, "upstream down", false},
		"permanent": {idem.StateDead, idemtype.OutcomeDead, "permanent failure: bad input", false},
		"panics":    {idem.StateRetryable, idemtype.OutcomeFailed, "panic: boom", true},
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	seen := map[string]map[idem.EventType]int{}
	for _, e := range obs.events {
		if seen[e.Kind] == nil {
			seen[e.Kind] = map[idem.EventType]int{}
		}
		seen[e.Kind][e.Type]++
		if e.Tenant != "default" || e.Queue != idem.DefaultQueue || (e.Type != idem.EventDeduplicated && e.JobID != ids[e.Kind]) {
			t.Errorf("event %+v: wrong job labels", e)
		}
		switch e.Type {
		case idem.EventClaimed:
			if e.Attempt != 1 || e.Wait < 0 {
				t.Errorf("claim %+v", e)
			}
		case idem.EventFinished:
			w := want[e.Kind]
			if e.State != w.state || e.Outcome != w.outcome || !strings.HasPrefix(e.Err, w.err) || (w.err == "") != (e.Err == "") ||
				e.Panicked != w.panicked || e.Attempt != 1 || e.Run < 0 {
				t.Errorf("finished %+v, want %+v", e, w)
			}
		}
	}
	for kind := range want {
		if seen[kind][idem.EventEnqueued] != 1 || seen[kind][idem.EventClaimed] != 1 || seen[kind][idem.EventFinished] != 1 {
			t.Errorf("%s: events %v, want one enqueue, claim and finish", kind, seen[kind])
		}
	}
	if seen["ok"][idem.EventDeduplicated] != 1 {
		t.Errorf("repeated key: events %v, want one deduplicated", seen["ok"])
	}
}
