package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sum answers each call with its request doubled and records batch sizes.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	weights []int
}

func (rec *recorder) run(calls []*Call[int, int]) {
	ids := make([]int, len(calls))
	w := 0
	for i, c := range calls {
		ids[i] = c.Req
		w += c.Weight
	}
	rec.mu.Lock()
	rec.batches = append(rec.batches, ids)
	rec.weights = append(rec.weights, w)
	rec.mu.Unlock()
	for _, c := range calls {
		if c.Req < 0 {
			c.Answer(0, fmt.Errorf("negative %d", c.Req))
			continue
		}
		c.Answer(c.Req*2, nil)
	}
}

func TestSubmitAnswersEachCaller(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	r := New(&Config[int]{MaxCount: 16, Runners: 2}, rec.run)
	r.Start()
	defer r.Stop()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			req := i
			if i%7 == 0 {
				req = -i - 1
			}
			got, err := r.Submit(context.Background(), req, 1)
			if req < 0 {
				if err == nil || err.Error() != fmt.Sprintf("negative %d", req) {
					t.Errorf("req %d: err %v, want its own error", req, err)
				}
				return
			}
			if err != nil || got != 2*req {
				t.Errorf("req %d: got %d, %v", req, got, err)
			}
		})
	}
	wg.Wait()
	n := 0
	for _, b := range rec.batches {
		if len(b) > 16 {
			t.Errorf("batch of %d, max 16", len(b))
		}
		n += len(b)
	}
	if n != 200 {
		t.Errorf("ran %d requests, want 200", n)
	}
}

// gate blocks the first batch until released, so later requests queue up.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	rec     recorder
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) run(calls []*Call[int, int]) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.release
	}
	g.rec.run(calls)
}

// queued waits until n callers are blocked sending to r.
func submitAll(r *Runner[int, int], ctx context.Context, reqs []int, weight func(int) int) (chan error, *sync.WaitGroup) {
	errs := make(chan error, len(reqs))
	var wg sync.WaitGroup
	for _, q := range reqs {
		wg.Go(func() {
			_, err := r.Submit(ctx, q, weight(q))
			errs <- err
		})
	}
	return errs, &wg
}

// queueBehindGate starts a runner with cfg whose first batch (the request
// 0) holds in g until g.release is closed, then submits reqs (see
// submitAll) and waits until every one of them is queued behind that batch.
// Stopping r is the caller's.
func queueBehindGate(t *testing.T, cfg *Config[int], ctx context.Context, reqs []int, weight func(int) int) (*Runner[int, int], *gate, chan error, *sync.WaitGroup) {
	t.Helper()
	g := newGate()
	r := New(cfg, g.run)
	r.Start()
	go r.Submit(context.Background(), 0, 1)
	<-g.entered
	errs, wg := submitAll(r, ctx, reqs, weight)
	waitQueued(t, r, len(reqs))
	return r, g, errs, wg
}

// TestQueuedRequestsShareOneBatch: requests queued behind a running batch
// are gathered into one batch by the runner, with a spare too (it waits for
// a stuck batch and takes nothing from one that runs its course).
func TestQueuedRequestsShareOneBatch(t *testing.T) {
	// Not parallel: waitQueued counts every parked caller.
	for _, cfg := range []Config[int]{{}, {Spare: time.Hour}} {
		r, g, _, wg := queueBehindGate(t, &cfg, context.Background(), []int{1, 2, 3, 4, 5}, func(int) int { return 1 })
		close(g.release)
		wg.Wait()
		r.Stop()
		g.rec.mu.Lock()
		if len(g.rec.batches) != 2 || len(g.rec.batches[1]) != 5 {
			t.Fatalf("spare %v: batches %v, want [0] then the 5 queued together", cfg.Spare, g.rec.batches)
		}
		g.rec.mu.Unlock()
	}
}

func TestWeightsCapABatch(t *testing.T) {
	// Not parallel: waitQueued counts every parked caller.
	// Weights 4 each: a batch takes requests while below 10, so 3 (12).
	r, g, _, wg := queueBehindGate(t, &Config[int]{MaxWeight: 10}, context.Background(), []int{1, 2, 3, 4, 5, 6}, func(int) int { return 4 })
	defer r.Stop()
	close(g.release)
	wg.Wait()
	g.rec.mu.Lock()
	defer g.rec.mu.Unlock()
	if len(g.rec.batches) != 3 {
		t.Fatalf("batches %v, want 3", g.rec.batches)
	}
	for i, w := range g.rec.weights[1:] {
		if w != 12 {
			t.Errorf("batch %d weight %d, want 12", i+1, w)
		}
	}
}

func TestHeavyRequestRunsAlone(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	r := New(&Config[int]{MaxWeight: 10}, rec.run)
	r.Start()
	defer r.Stop()
	got, err := r.Submit(context.Background(), 21, 50)
	if err != nil || got != 42 {
		t.Fatalf("got %d, %v", got, err)
	}
}

func TestCountCapsABatch(t *testing.T) {
	// Not parallel: waitQueued counts every parked caller.
	r, g, _, wg := queueBehindGate(t, &Config[int]{MaxCount: 2}, context.Background(), []int{1, 2, 3, 4}, func(int) int { return 0 })
	defer r.Stop()
	close(g.release)
	wg.Wait()
	g.rec.mu.Lock()
	defer g.rec.mu.Unlock()
	for _, b := range g.rec.batches {
		if len(b) > 2 {
			t.Errorf("batch %v over MaxCount 2", b)
		}
	}
}

func TestAdmitKeepsConflictsApart(t *testing.T) {
	// Not parallel: waitQueued counts every parked caller.
	// Requests with the same value never share a batch.
	admit := func() func(int) bool {
		seen := map[int]bool{}
		return func(v int) bool {
			if seen[v] {
				return false
			}
			seen[v] = true
			return true
		}
	}
	r, g, _, wg := queueBehindGate(t, &Config[int]{Admit: admit}, context.Background(), []int{7, 7, 7, 8}, func(int) int { return 1 })
	defer r.Stop()
	close(g.release)
	wg.Wait()
	g.rec.mu.Lock()
	defer g.rec.mu.Unlock()
	total := 0
	for _, b := range g.rec.batches {
		seen := map[int]bool{}
		for _, v := range b {
			if seen[v] {
				t.Errorf("batch %v holds %d twice", b, v)
			}
			seen[v] = true
		}
		total += len(b)
	}
	if total != 5 {
		t.Errorf("ran %d, want 5", total)
	}
}

func TestCanceledBeforeBatchIsDropped(t *testing.T) {
	// Not parallel: waitQueued counts every parked caller.
	ctx, cancel := context.WithCancel(context.Background())
	// The request is taken only when the gate opens: by then its ctx is
	// done, so it is dropped with the ctx error, or it returns before
	// being taken; either way it never runs.
	r, g, errs, wg := queueBehindGate(t, &Config[int]{}, ctx, []int{99}, func(int) int { return 1 })
	defer r.Stop()
	cancel()
	close(g.release)
	wg.Wait()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	g.rec.mu.Lock()
	defer g.rec.mu.Unlock()
	for _, b := range g.rec.batches {
		for _, v := range b {
			if v == 99 {
				t.Fatal("a canceled request ran")
			}
		}
	}
}

func TestCanceledContextIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	r := New(&Config[int]{}, rec.run)
	r.Start()
	defer r.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Submit(ctx, 1, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// startHeldRunner starts a runner with cfg whose one batch closes ran, then
// waits for release to be closed before it answers each request with its
// own value.
func startHeldRunner(cfg *Config[int]) (r *Runner[int, int], ran, release chan struct{}) {
	ran, release = make(chan struct{}), make(chan struct{})
	r = New(cfg, func(calls []*Call[int, int]) {
		close(ran)
		<-release
		for _, c := range calls {
			c.Answer(c.Req, nil)
		}
	})
	r.Start()
	return r, ran, release
}

func TestTakenRequestIsWaitedFor(t *testing.T) {
	t.Parallel()
	r, ran, release := startHeldRunner(&Config[int]{})
	defer r.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	type res struct {
		v   int
		err error
	}
	out := make(chan res, 1)
	go func() {
		v, err := r.Submit(ctx, 5, 1)
		out <- res{v, err}
	}()
	<-ran
	cancel()
	close(release)
	if got := <-out; got.err != nil || got.v != 5 {
		t.Fatalf("got %+v, want the answer of the batch that ran", got)
	}
}

func TestReturnOnCancel(t *testing.T) {
	t.Parallel()
	r, ran, release := startHeldRunner(&Config[int]{ReturnOnCancel: true})
	defer r.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() {
		_, err := r.Submit(ctx, 5, 1)
		out <- err
	}()
	<-ran
	cancel()
	if err := <-out; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled while the batch runs", err)
	}
	close(release)
}

func TestStopAnswersWaiters(t *testing.T) {
	// Not parallel: waitQueued counts every parked caller.
	g := newGate()
	r := New(&Config[int]{}, g.run)
	r.Start()
	first := make(chan error, 1)
	go func() {
		_, err := r.Submit(context.Background(), 0, 1)
		first <- err
	}()
	<-g.entered
	errs, wg := submitAll(r, context.Background(), []int{1, 2, 3}, func(int) int { return 1 })
	waitQueued(t, r, 3)
	stopped := make(chan struct{})
	go func() { r.Stop(); close(stopped) }()
	// Stop waits for the running batch; the queued callers either get
	// ErrStopped or were taken by the last gather and ran.
	close(g.release)
	<-stopped
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("running batch: %v", err)
	}
	for range 3 {
		if err := <-errs; err != nil && !errors.Is(err, ErrStopped) {
			t.Errorf("queued caller: %v", err)
		}
	}
	if _, err := r.Submit(context.Background(), 1, 1); !errors.Is(err, ErrStopped) {
		t.Errorf("after Stop: %v, want ErrStopped", err)
	}
	r.Stop() // idempotent
}

func TestStopWithRefusedRequestAnswersIt(t *testing.T) {
	// Not parallel: waitQueued counts every parked caller.
	admit := func() func(int) bool {
		n := 0
		return func(int) bool { n++; return n == 1 }
	}
	r, g, errs, wg := queueBehindGate(t, &Config[int]{Admit: admit}, context.Background(), []int{1, 2}, func(int) int { return 1 })
	close(g.release)
	r.Stop()
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, ErrStopped) {
			t.Errorf("caller: %v", err)
		}
	}
}

func TestDeferredAnswers(t *testing.T) {
	t.Parallel()
	later := make(chan []*Call[int, int], 64)
	r := New(&Config[int]{Runners: 2}, func(calls []*Call[int, int]) { later <- calls })
	r.Start()
	var answered sync.WaitGroup
	answered.Go(func() {
		for calls := range later {
			for _, c := range calls {
				c.Answer(c.Req+1, nil)
			}
		}
	})
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range 100 {
		wg.Go(func() {
			if v, err := r.Submit(context.Background(), i, 1); err != nil || v != i+1 {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	r.Stop()
	close(later)
	answered.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d wrong answers", bad.Load())
	}
}

func TestManyGoroutinesWithCancellation(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	r := New(&Config[int]{MaxCount: 8, MaxWeight: 20, Runners: 3, Yields: 1}, rec.run)
	r.Start()
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			if i%5 == 0 {
				cancel()
			}
			defer cancel()
			v, err := r.Submit(ctx, i, i%4)
			switch {
			case err == nil && v != 2*i:
				t.Errorf("req %d: got %d", i, v)
			case err != nil && !errors.Is(err, context.Canceled):
				t.Errorf("req %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	r.Stop()
}

// waitQueued waits until n callers are parked in Submit's send select
// (goroutine state "select", Submit on the stack): a parked sender is
// found by the runner's next gather. It yields between looks, never sleeps.
func waitQueued(t *testing.T, r *Runner[int, int], n int) {
	t.Helper()
	// The tests that use it do not run in parallel, so every parked
	// Submit is one of r's callers.
	_ = r
	frame := "batch.(*Runner[...]).Submit("
	buf := make([]byte, 1<<20)
	for {
		k := runtime.Stack(buf, true)
		got := 0
		for _, g := range strings.Split(string(buf[:k]), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, frame) {
				got++
			}
		}
		if got >= n {
			return
		}
		runtime.Gosched()
	}
}

// TestSpareRunsWhileABatchIsStuck: with one runner and a spare, a batch
// that does not return (the gate) does not hold back the next callers: the
// spare takes them once the stuck batch is older than Spare, and Stop still
// drains both.
func TestSpareRunsWhileABatchIsStuck(t *testing.T) {
	t.Parallel()
	g := newGate()
	r := New(&Config[int]{Spare: 20 * time.Millisecond}, g.run)
	r.Start()
	first := make(chan error, 1)
	go func() {
		_, err := r.Submit(context.Background(), 0, 1)
		first <- err
	}()
	<-g.entered
	// Without the spare these wait for the gate, which opens only after
	// them: the deadline turns that hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range []int{1, 2, 3} {
		if got, err := r.Submit(ctx, q, 1); err != nil || got != 2*q {
			t.Fatalf("request %d behind a stuck batch: %d, %v", q, got, err)
		}
	}
	close(g.release)
	if err := <-first; err != nil {
		t.Fatalf("stuck batch: %v", err)
	}
	r.Stop()
}
