package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/recordlease"
	"github.com/idem-dev/idem/store"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		res, err := b.client.Enqueue(ctx, SendArgs{To: "a"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		j := res.Job
		if res.Existing || j.Tenant != "default" || j.Queue != "default" || j.Kind != "send" ||
			j.State != idem.StateAvailable || j.MaxAttempts != idem.DefaultMaxAttempts || j.Attempt != 0 {
			t.Fatalf("unexpected job %+v existing=%v", j, res.Existing)
		}
		if string(j.Args) != `{"to":"a","n":0}` {
			t.Fatalf("args %s", j.Args)
		}
	})

	t.Run("future run_at is scheduled", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		res, err := b.client.Enqueue(ctx, SendArgs{}, &idem.EnqueueOpts{RunAt: time.Now().Add(time.Hour)})
		if err != nil || res.Job.State != idem.StateScheduled {
			t.Fatalf("got %+v, %v", res, err)
		}
	})

	t.Run("bad input is ErrInvalid and writes nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		cases := []idem.EnqueueParams{
			{Kind: ""},
			{Kind: "k", Args: json.RawMessage(`{bad`)},
			{Kind: "k", Opts: &idem.EnqueueOpts{IdempotencyKey: strings.Repeat("x", 256)}},
			{Kind: "k", Opts: &idem.EnqueueOpts{IdempotencyKey: "has\ttab"}}, // a space is allowed; a control character is not
			{Kind: "k", Opts: &idem.EnqueueOpts{MaxAttempts: -1}},
			{Kind: "k", Opts: &idem.EnqueueOpts{Metadata: json.RawMessage(`[1]`)}},
			{Kind: "k", Opts: &idem.EnqueueOpts{DependsOn: []int64{0}}},
		}
		for i, c := range cases {
			if _, err := b.client.EnqueueRaw(ctx, c); !errors.Is(err, idem.ErrInvalid) {
				t.Errorf("case %d: want ErrInvalid, got %v", i, err)
			}
		}
		// A batch with one bad item writes nothing.
		_, err := b.client.EnqueueMany(ctx, []idem.EnqueueParams{{Kind: "ok"}, {Kind: ""}})
		if !errors.Is(err, idem.ErrInvalid) {
			t.Fatalf("batch: want ErrInvalid, got %v", err)
		}
		jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{})
		if err != nil || len(jobs) != 0 {
			t.Fatalf("bad input wrote %d jobs (%v)", len(jobs), err)
		}
	})

	t.Run("batch is one call with results in order", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		items := make([]idem.EnqueueParams, 1000)
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "k", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		}
		res, err := b.client.EnqueueMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || string(r.Job.Args) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Fatalf("item %d: %+v", i, r)
			}
			if i > 0 && r.Job.ID <= res[i-1].Job.ID {
				t.Fatalf("ids not increasing at %d", i)
			}
		}
	})
}

func TestExactlyOnceCreation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("64 concurrent enqueues of one key make one job", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		const n = 64
		results := make([]*idem.EnqueueResult, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := b.client.Enqueue(ctx, SendArgs{To: "x"}, &idem.EnqueueOpts{IdempotencyKey: "one-key"})
				if err != nil {
					t.Errorf("enqueue %d: %v", i, err)
					return
				}
				results[i] = r
			}()
		}
		close(start)
		wg.Wait()
		created, existing := 0, 0
		for _, r := range results {
			if r == nil {
				continue
			}
			if r.Existing {
				existing++
			} else {
				created++
			}
			if r.Job.ID != results[0].Job.ID {
				t.Fatalf("two jobs for one key: %d and %d", r.Job.ID, results[0].Job.ID)
			}
		}
		if created != 1 || existing != n-1 {
			t.Fatalf("created %d existing %d, want 1 and %d", created, existing, n-1)
		}
		jobs, _, _ := b.client.JobList(ctx, &idem.JobListParams{Limit: 500})
		if len(jobs) != 1 {
			t.Fatalf("%d jobs stored, want 1", len(jobs))
		}
	})

	t.Run("same key, other payload is ErrKeyReused with the job id", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		first, err := b.client.Enqueue(ctx, SendArgs{To: "a"}, &idem.EnqueueOpts{IdempotencyKey: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.client.Enqueue(ctx, SendArgs{To: "b"}, &idem.EnqueueOpts{IdempotencyKey: "k1"})
		var kr *idem.KeyReusedError
		if !errors.Is(err, idem.ErrKeyReused) || !errors.As(err, &kr) || kr.JobID != first.Job.ID {
			t.Fatalf("want KeyReusedError for job %d, got %v", first.Job.ID, err)
		}
		// Whitespace and key order of args do not make another request.
		r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "send", Args: json.RawMessage(` {"n":0, "to":"a"}`),
			Opts: &idem.EnqueueOpts{IdempotencyKey: "k1"}})
		if err != nil || !r.Existing || r.Job.ID != first.Job.ID {
			t.Fatalf("canonical repeat: %+v %v", r, err)
		}
	})

	t.Run("keys are scoped by tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		a, _ := b.client.Enqueue(ctx, SendArgs{}, &idem.EnqueueOpts{IdempotencyKey: "k", Tenant: "a"})
		c, err := b.client.Enqueue(ctx, SendArgs{}, &idem.EnqueueOpts{IdempotencyKey: "k", Tenant: "c"})
		if err != nil || c.Existing || c.Job.ID == a.Job.ID {
			t.Fatalf("tenant c reused tenant a's key: %+v %v", c, err)
		}
		mine, _, _ := b.client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Tenant: "a"}})
		all, _, _ := b.client.JobListAll(ctx, &idem.JobListParams{})
		dflt, _, _ := b.client.JobList(ctx, &idem.JobListParams{})
		if len(mine) != 1 || len(all) != 2 || len(dflt) != 0 {
			t.Fatalf("lists: tenant a %d, all %d, default %d; want 1, 2, 0", len(mine), len(all), len(dflt))
		}
	})

	t.Run("dedup window 0 dedupes only while unfinished", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &idem.Config{Queues: queues(2)})
		var calls atomic.Int32
		idem.AddWorker(b.workers, idem.WorkFunc[SendArgs](func(ctx context.Context, j *idem.Job[SendArgs]) (any, error) {
			calls.Add(1)
			return map[string]string{"sent": j.Args.To}, nil
		}))
		zero := time.Duration(0)
		opts := &idem.EnqueueOpts{IdempotencyKey: "w0", DedupWindow: &zero}
		first, err := b.client.Enqueue(ctx, SendArgs{To: "z"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := b.client.Enqueue(ctx, SendArgs{To: "z"}, opts)
		if !again.Existing || again.Job.ID != first.Job.ID {
			t.Fatalf("unfinished job not deduplicated: %+v", again)
		}
		b.start(t)
		waitState(t, b, first.Job.ID, idem.StateCompleted)
		// The window has closed: a new job is created, and it completes from
		// the cache without running the handler.
		second, err := b.client.Enqueue(ctx, SendArgs{To: "z"}, opts)
		if err != nil || second.Existing || second.Job.ID == first.Job.ID {
			t.Fatalf("window 0 did not reopen: %+v %v", second, err)
		}
		done := waitState(t, b, second.Job.ID, idem.StateCompleted)
		if !done.WasCached || done.OriginalJobID != first.Job.ID || string(done.Result) != `{"sent":"z"}` {
			t.Fatalf("second job not from cache: %+v result %s", done, done.Result)
		}
		if calls.Load() != 1 {
			t.Fatalf("handler called %d times, want 1", calls.Load())
		}
		st, err := b.client.CacheStats(ctx, "")
		if err != nil || st.Hits != 1 || st.Misses != 1 || st.Entries != 1 {
			t.Fatalf("cache stats %+v %v", st, err)
		}
	})

	t.Run("a negative Config.DedupWindow is a window of 0", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &idem.Config{Queues: queues(1), DedupWindow: -1})
		idem.AddWorker(b.workers, idem.WorkFunc[SendArgs](func(ctx context.Context, j *idem.Job[SendArgs]) (any, error) {
			return nil, nil
		}))
		opts := &idem.EnqueueOpts{IdempotencyKey: "cw0"}
		first, err := b.client.Enqueue(ctx, SendArgs{To: "z"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := b.client.Enqueue(ctx, SendArgs{To: "z"}, opts); err != nil || !again.Existing {
			t.Fatalf("unfinished job not deduplicated: %+v %v", again, err)
		}
		b.start(t)
		waitState(t, b, first.Job.ID, idem.StateCompleted)
		second, err := b.client.Enqueue(ctx, SendArgs{To: "z"}, opts)
		if err != nil || second.Existing || second.Job.ID == first.Job.ID {
			t.Fatalf("window 0 did not reopen: %+v %v", second, err)
		}
	})

	t.Run("existing job is returned whatever its state", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &idem.Config{Queues: queues(1)})
		b.workers.Handle("fail", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			return nil, idem.JobPermanent(errors.New("nope"))
		})
		r, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "fail", Opts: &idem.EnqueueOpts{IdempotencyKey: "dead-key"}})
		b.start(t)
		waitState(t, b, r.Job.ID, idem.StateDead)
		again, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "fail", Opts: &idem.EnqueueOpts{IdempotencyKey: "dead-key"}})
		if err != nil || !again.Existing || again.Job.State != idem.StateDead {
			t.Fatalf("dead job's key: %+v %v", again, err)
		}
	})
}

// TestExactlyOnceExecution: 10,000 jobs worked by eight queues' producers
// fetching up to 200 at a time each run exactly once: every handler call
// is counted per job, and every job ends completed. (20,000 until the
// twenty-third session, two minutes of CI's twenty under -race.)
func TestExactlyOnceExecution(t *testing.T) {
	t.Parallel()
	b := setup(t, &idem.Config{Queues: queues(8), FetchLimit: 200})
	const n = 10000
	counts := make([]atomic.Int32, n+1)
	var maxID, ran atomic.Int64
	b.workers.Handle("count", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a struct{ I int }
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		counts[a.I].Add(1)
		ran.Add(1)
		return nil, nil
	})
	ctx := context.Background()
	var all []int64
	for off := 0; off < n; off += 1000 {
		items := make([]idem.EnqueueParams, 1000)
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "count", Args: json.RawMessage(fmt.Sprintf(`{"I":%d}`, off+i+1))}
		}
		res, err := b.client.EnqueueMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		maxID.Store(res[len(res)-1].Job.ID)
		all = append(all, ids(res)...)
	}
	b.start(t)
	for _, row := range waitAll(t, b.client, all, 300*time.Second) {
		if row.State != idem.StateCompleted {
			t.Fatalf("job %d: %s", row.ID, row.State)
		}
	}
	if ran.Load() != n {
		t.Fatalf("%d handler calls, want %d", ran.Load(), n)
	}
	for i := 1; i <= n; i++ {
		if c := counts[i].Load(); c != 1 {
			t.Fatalf("job %d ran %d times", i, c)
		}
	}
}

func TestHandlerControlFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	t.Run("backoff schedule then dead", func(t *testing.T) {
		t.Parallel()
		clock := &fakeClock{now: base}
		policy := idem.RetryPolicy{Base: time.Second, Factor: 5, Jitter: -1} // seed 004: 1s, 5s, 25s
		b := setup(t, &idem.Config{Queues: queues(1), Now: clock.Now, Retry: policy, DisableMaintenance: true})
		called := make(chan struct{}, 10)
		b.workers.Handle("flaky", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			called <- struct{}{}
			return nil, errors.New("boom")
		})
		r, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "flaky", Opts: &idem.EnqueueOpts{MaxAttempts: 4}})
		b.start(t)
		waitCalled := func() {
			t.Helper()
			select {
			case <-called:
			case <-time.After(waitTimeout):
				t.Fatal("handler not called")
			}
		}
		waitCalled()
		for attempt, want := range []time.Duration{time.Second, 5 * time.Second, 25 * time.Second} {
			row := waitState(t, b, r.Job.ID, idem.StateRetryable)
			if row.Attempt != attempt+1 || !row.RunAt.Equal(clock.Now().Add(want)) || row.LastError != "boom" {
				t.Fatalf("attempt %d: attempt=%d run_at=%s want now+%s", attempt+1, row.Attempt, row.RunAt, want)
			}
			clock.Add(want)
			waitCalled() // the next attempt started
		}
		row := waitState(t, b, r.Job.ID, idem.StateDead)
		attempts, err := b.client.JobAttempts(ctx, "", row.ID)
		if err != nil || len(attempts) != 4 || attempts[3].Outcome != "dead" || attempts[0].Outcome != "failed" {
			t.Fatalf("attempts %v %v", attempts, err)
		}
	})

	t.Run("a job's own retry policy wins over the queue's", func(t *testing.T) {
		t.Parallel()
		clock := &fakeClock{now: base}
		b := setup(t, &idem.Config{Queues: queues(1), Now: clock.Now, DisableMaintenance: true,
			RetryByQueue: map[string]idem.RetryPolicy{idem.DefaultQueue: {Base: time.Hour, Jitter: -1}}})
		b.workers.Handle("own", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			return nil, errors.New("boom")
		})
		own := &idem.RetryPolicy{Delays: []time.Duration{7 * time.Second, 11 * time.Second}, Jitter: -1}
		r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "own", Opts: &idem.EnqueueOpts{Retry: own}})
		if err != nil {
			t.Fatal(err)
		}
		other, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "own"})
		b.start(t)
		if row := waitState(t, b, r.Job.ID, idem.StateRetryable); !row.RunAt.Equal(base.Add(7 * time.Second)) {
			t.Fatalf("own policy: run_at %s, want base+7s", row.RunAt)
		}
		if row := waitState(t, b, other.Job.ID, idem.StateRetryable); !row.RunAt.Equal(base.Add(time.Hour)) {
			t.Fatalf("queue policy: run_at %s, want base+1h", row.RunAt)
		}
		if _, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "own",
			Opts: &idem.EnqueueOpts{Retry: &idem.RetryPolicy{Base: -time.Second}}}); !errors.Is(err, idem.ErrInvalid) {
			t.Fatalf("negative base: want ErrInvalid, got %v", err)
		}
	})

	t.Run("snooze uses no attempt", func(t *testing.T) {
		t.Parallel()
		clock := &fakeClock{now: base}
		b := setup(t, &idem.Config{Queues: queues(1), Now: clock.Now, DisableMaintenance: true})
		var calls atomic.Int32
		b.workers.Handle("snoozy", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			if calls.Add(1) == 1 {
				return nil, idem.JobSnooze(time.Minute)
			}
			return json.RawMessage(`"ok"`), nil
		})
		r, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "snoozy"})
		b.start(t)
		row := waitState(t, b, r.Job.ID, idem.StateScheduled)
		if row.Attempt != 0 || !row.RunAt.Equal(base.Add(time.Minute)) {
			t.Fatalf("snoozed: attempt %d run_at %s", row.Attempt, row.RunAt)
		}
		clock.Add(time.Minute)
		row = waitState(t, b, r.Job.ID, idem.StateCompleted)
		if row.Attempt != 1 || string(row.Result) != `"ok"` {
			t.Fatalf("completed: %+v", row)
		}
	})

	t.Run("permanent, cancel, retry-after and panic", func(t *testing.T) {
		t.Parallel()
		clock := &fakeClock{now: base}
		b := setup(t, &idem.Config{Queues: queues(4), Now: clock.Now, DisableMaintenance: true})
		b.workers.Handle("perm", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return nil, idem.JobPermanent(errors.New("bad data"))
		})
		b.workers.Handle("cancel", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return nil, idem.JobCancel(errors.New("not needed"))
		})
		b.workers.Handle("later", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return nil, idem.JobRetryAfter(42*time.Second, errors.New("rate limited"))
		})
		b.workers.Handle("panic", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			panic("kaboom")
		})
		ids := map[string]int64{}
		for _, k := range []string{"perm", "cancel", "later", "panic"} {
			r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: k})
			if err != nil {
				t.Fatal(err)
			}
			ids[k] = r.Job.ID
		}
		b.start(t)
		if row := waitState(t, b, ids["perm"], idem.StateDead); row.Attempt != 1 || !strings.Contains(row.LastError, "bad data") {
			t.Fatalf("perm: %+v", row)
		}
		waitState(t, b, ids["cancel"], idem.StateCancelled)
		if row := waitState(t, b, ids["later"], idem.StateRetryable); !row.RunAt.Equal(base.Add(42 * time.Second)) {
			t.Fatalf("retry after: run_at %s", row.RunAt)
		}
		waitState(t, b, ids["panic"], idem.StateRetryable)
		attempts, _ := b.client.JobAttempts(ctx, "", ids["panic"])
		if len(attempts) != 1 || !strings.Contains(attempts[0].Error, "kaboom") || !strings.Contains(attempts[0].Error, "goroutine") {
			t.Fatalf("panic attempt lacks the stack: %+v", attempts)
		}
	})
}

func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &idem.Config{Queues: queues(1)})
	started := make(chan struct{})
	stopped := make(chan error, 1)
	b.workers.Handle("block", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	r, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "block"})
	b.start(t)
	<-started
	row, err := b.client.JobCancel(ctx, "", r.Job.ID)
	if err != nil || row.State != idem.StateCancelled {
		t.Fatalf("cancel: %+v %v", row, err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not cancelled")
	}
	if _, err := b.client.JobCancel(ctx, "", r.Job.ID); !errors.Is(err, idem.ErrWrongState) {
		t.Fatalf("second cancel: want ErrWrongState, got %v", err)
	}
	// Retry brings it back; the handler runs again.
	if row, err := b.client.JobRetry(ctx, "", r.Job.ID, time.Time{}); err != nil || row.Attempt != 0 {
		t.Fatalf("retry: %+v %v", row, err)
	}
}

func TestShutdownReleasesLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testStore(t)
	w1 := idem.NewWorkers()
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	w1.Handle("slow", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		close(started)
		<-release // ignores ctx on purpose: a stuck handler
		return nil, nil
	})
	c1, _ := idem.NewClient(st, &idem.Config{Workers: w1, Queues: queues(1), Logger: quietLogger()})
	r, _ := c1.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "slow"})
	if err := c1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c1.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	row, _ := c1.JobGet(ctx, "", r.Job.ID)
	if row.State != idem.StateAvailable || row.Attempt != 0 {
		t.Fatalf("after shutdown: state %s attempt %d, want available 0", row.State, row.Attempt)
	}
	// Another client takes it at once, without waiting for a lease to expire.
	w2 := idem.NewWorkers()
	w2.Handle("slow", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	b2 := &bundle{store: st, workers: w2}
	b2.client, _ = idem.NewClient(st, &idem.Config{Workers: w2, Queues: queues(1), Logger: quietLogger()})
	b2.start(t)
	waitState(t, b2, r.Job.ID, idem.StateCompleted)
}

func TestDependencies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &idem.Config{Queues: queues(4)})
	var order []string
	var mu sync.Mutex
	b.workers.Handle("step", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a struct{ Name string }
		_ = json.Unmarshal(j.Args, &a)
		mu.Lock()
		order = append(order, a.Name)
		mu.Unlock()
		if a.Name == "bad" {
			return nil, idem.JobPermanent(errors.New("dies"))
		}
		return nil, nil
	})
	enq := func(name string, deps ...int64) *idem.JobRow {
		r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "step", Args: json.RawMessage(`{"Name":"` + name + `"}`),
			Opts: &idem.EnqueueOpts{DependsOn: deps}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Job
	}
	a := enq("a")
	c := enq("c", a.ID)
	if c.State != idem.StatePending {
		t.Fatalf("dependant state %s, want pending", c.State)
	}
	bad := enq("bad")
	child := enq("child", bad.ID)
	grandchild := enq("grandchild", child.ID)
	b.start(t)
	waitState(t, b, c.ID, idem.StateCompleted)
	waitState(t, b, bad.ID, idem.StateDead)
	row := waitState(t, b, child.ID, idem.StateCancelled)
	if !strings.Contains(row.LastError, fmt.Sprint(bad.ID)) {
		t.Fatalf("cancel reason %q does not name the dependency", row.LastError)
	}
	waitState(t, b, grandchild.ID, idem.StateCancelled)
	mu.Lock()
	defer mu.Unlock()
	ia, ic := indexOf(order, "a"), indexOf(order, "c")
	if ia < 0 || ic < ia || indexOf(order, "child") >= 0 {
		t.Fatalf("run order %v", order)
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func TestFIFOPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &idem.Config{Queues: queues(8)})
	const parts, per = 8, 40
	var mu sync.Mutex
	seen := map[string][]int{}
	running := map[string]bool{}
	var overlap atomic.Int32
	b.workers.Handle("ordered", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a struct{ Seq int }
		_ = json.Unmarshal(j.Args, &a)
		mu.Lock()
		if running[j.PartitionKey] {
			overlap.Add(1)
		}
		running[j.PartitionKey] = true
		seen[j.PartitionKey] = append(seen[j.PartitionKey], a.Seq)
		mu.Unlock()
		time.Sleep(time.Millisecond) // widen the window for an overlap to show
		mu.Lock()
		running[j.PartitionKey] = false
		mu.Unlock()
		if a.Seq%7 == 3 && j.Attempt == 1 {
			return nil, idem.JobRetryAfter(0, errors.New("retry the head once"))
		}
		return nil, nil
	})
	var items []idem.EnqueueParams
	for s := range per {
		for p := range parts {
			items = append(items, idem.EnqueueParams{Kind: "ordered", Args: json.RawMessage(fmt.Sprintf(`{"Seq":%d}`, s)),
				Opts: &idem.EnqueueOpts{PartitionKey: fmt.Sprintf("entity-%d", p)}})
		}
	}
	res, err := b.client.EnqueueMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	waitAll(t, b.client, ids(res), 60*time.Second)
	if overlap.Load() > 0 {
		t.Fatalf("%d times two jobs of one partition ran at once", overlap.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for p, seqs := range seen {
		// Each retried head runs twice in a row; otherwise strictly in order.
		want := 0
		for i := 0; i < len(seqs); i++ {
			if seqs[i] != want {
				t.Fatalf("partition %s ran %v", p, seqs)
			}
			if want%7 == 3 && (i+1 < len(seqs) && seqs[i+1] == want) {
				i++
			}
			want++
		}
	}
}

func TestDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("concurrent callers run fn once", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		var calls atomic.Int32
		var wg sync.WaitGroup
		results := make([]*idem.DoResult, 16)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := b.client.Do(ctx, "do-key", func(ctx context.Context) (any, error) {
					calls.Add(1)
					time.Sleep(20 * time.Millisecond) // simulates work while the others wait on the key
					return map[string]int{"area": 42}, nil
				}, &idem.DoOpts{Wait: 10 * time.Second})
				if err != nil {
					t.Errorf("do %d: %v", i, err)
					return
				}
				results[i] = r
			}()
		}
		wg.Wait()
		if calls.Load() != 1 {
			t.Fatalf("fn ran %d times", calls.Load())
		}
		cached := 0
		for _, r := range results {
			if r != nil && string(r.Result) == `{"area":42}` && r.WasCached {
				cached++
			}
		}
		if cached != 15 {
			t.Fatalf("%d cached results, want 15", cached)
		}
	})

	t.Run("failures are not cached; no wait means ErrKeyInProgress", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, err := b.client.Do(ctx, "k", func(context.Context) (any, error) { return nil, errors.New("fail") }, nil)
		if err == nil {
			t.Fatal("want the error")
		}
		inside := make(chan struct{})
		finish := make(chan struct{})
		go func() {
			_, _ = b.client.Do(ctx, "k", func(context.Context) (any, error) {
				close(inside)
				<-finish
				return "second", nil
			}, nil)
		}()
		<-inside
		if _, err := b.client.Do(ctx, "k", func(context.Context) (any, error) { return nil, nil }, nil); !errors.Is(err, idem.ErrKeyInProgress) {
			t.Fatalf("want ErrKeyInProgress, got %v", err)
		}
		close(finish)
		r, err := b.client.Do(ctx, "k", func(context.Context) (any, error) { return "third", nil }, &idem.DoOpts{Wait: 10 * time.Second})
		if err != nil || string(r.Result) != `"second"` || !r.WasCached {
			t.Fatalf("after success: %+v %v", r, err)
		}
	})

	t.Run("large results are compressed and read back", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		big := strings.Repeat("parcel ", 2000)
		if _, err := b.client.Do(ctx, "big", func(context.Context) (any, error) { return big, nil }, nil); err != nil {
			t.Fatal(err)
		}
		raw, err := b.store.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: recordlease.Key(recordlease.PurposeDo, "big"), Now: time.Now()})
		if err != nil || !raw.Compressed || raw.SizeBytes >= int64(len(big)) {
			t.Fatalf("stored record not compressed: %+v %v", raw, err)
		}
		rec, err := b.client.DoRecordGet(ctx, "", "big")
		if err != nil || string(rec.Result) != `"`+big+`"` {
			t.Fatalf("read back: %v", err)
		}
		r, err := b.client.Do(ctx, "big", func(context.Context) (any, error) { return nil, errors.New("must not run") }, nil)
		if err != nil || !r.WasCached || string(r.Result) != `"`+big+`"` {
			t.Fatalf("cached big: %v", err)
		}
	})
}
