// Package batch gathers what is queued, runs it as one batch and answers
// each caller.
//
// Callers Submit a request with a weight. A runner goroutine takes the first
// waiting request, adds every other request already queued (while the batch
// holds fewer than Config.MaxCount requests and less than Config.MaxWeight
// weight), hands them to the run function as one batch, and each caller gets
// its own answer. Nothing waits on a timer: while one batch runs, the next
// one gathers, so batches grow exactly as fast as callers arrive. (Only the
// optional spare runner, Config.Spare, keeps a timer, to tell a batch that
// is stuck.)
//
// A request whose caller's context is done before its batch runs is dropped
// and answered with the context's error. After Stop, queued and new callers
// get ErrStopped.
//
// The run function answers each Call exactly once, either before it returns
// or later from another goroutine (for instance after an fsync that covers
// several batches).
package batch

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStopped is returned by Submit once the Runner is stopping or stopped.
var ErrStopped = errors.New("batch: runner stopped")

// Defaults of Config.
const (
	// DefaultMaxCount is the default most requests in one batch.
	DefaultMaxCount = 1000
	// DefaultMaxWeight is the default most weight in one batch.
	DefaultMaxWeight = 1000
	// DefaultRunners is the default number of batches run at once.
	DefaultRunners = 1
)

// Config tunes a Runner. The zero value uses the defaults.
type Config[Req any] struct {
	// MaxCount: a batch takes more requests only while it holds fewer
	// than MaxCount. Default DefaultMaxCount.
	MaxCount int
	// MaxWeight: a batch takes more requests only while its weight is
	// below MaxWeight; the request that crosses it still joins, so one
	// heavy request always runs. Default DefaultMaxWeight.
	MaxWeight int
	// Runners is the number of batches that may run at once, each
	// gathered by its own goroutine. Default DefaultRunners.
	Runners int
	// Spare, when positive, adds one runner that takes batches only
	// while every other runner has been running its batch for longer than
	// Spare (it starts between Spare and about twice Spare after such a
	// batch began): a batch stuck on a lock does not hold back every
	// caller, yet in the usual case the runners gather batches as large as
	// one runner does. Once a runner is free again the spare may still take
	// one batch. It applies Admit within its batches, and runs a refused
	// request as the first of its next batch without checking again that
	// the runners are stuck.
	Spare time.Duration
	// Yields is how many times a runner yields the processor
	// (runtime.Gosched) when the queue looks empty before it closes the
	// batch: callers answered by the previous batch are often about to
	// submit again, and a yield costs far less than a batch. Default 0.
	Yields int
	// Admit, when set, returns a fresh filter for each batch being
	// gathered. The filter is called with every request taken, the first
	// one included; when it returns false for a request other than the
	// first, the batch closes without it and the request starts the next
	// batch. Use it to keep conflicting requests out of one batch.
	Admit func() func(Req) bool
	// ReturnOnCancel makes a caller whose context ends while its batch
	// runs return the context's error at once, without its answer. By
	// default a request taken into a batch is always waited for, so the
	// caller learns the outcome of a write that did commit.
	ReturnOnCancel bool
}

// Call is one caller's request inside a batch.
type Call[Req, Resp any] struct {
	// Req is the request as submitted.
	Req Req
	// Weight is the weight given to Submit.
	Weight int
	ctx    context.Context
	done   chan answer[Resp]
}

type answer[Resp any] struct {
	resp Resp
	err  error
}

// Context returns the caller's context. The run function may check it
// again before the request's own work; the Runner already dropped calls
// whose context was done when the batch started.
func (c *Call[Req, Resp]) Context() context.Context { return c.ctx }

// Answer gives the caller its result. Call it exactly once per Call, and do
// not touch the Call afterwards: it is reused.
func (c *Call[Req, Resp]) Answer(resp Resp, err error) {
	c.done <- answer[Resp]{resp: resp, err: err}
}

// Runner gathers submitted requests into batches and runs them.
type Runner[Req, Resp any] struct {
	cfg      Config[Req]
	run      func([]*Call[Req, Resp])
	queue    chan *Call[Req, Resp] // unbuffered: a blocked sender is a queued request
	quit     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
	pool     sync.Pool
	// busy holds, per runner (the spare excluded), when its batch began
	// (nanoseconds since epoch plus one; 0 while it gathers or waits), set
	// only with Config.Spare; started tells the spare that one began.
	busy    []atomic.Int64
	started chan struct{}
	epoch   time.Time // busy times count from it (monotonic)
}

// New returns a Runner that calls run with each batch. run must answer
// every Call of its batch exactly once; the calls slice is its own to keep
// (a fresh one per batch). Call Start to begin.
func New[Req, Resp any](cfg *Config[Req], run func(calls []*Call[Req, Resp])) *Runner[Req, Resp] {
	var c Config[Req]
	if cfg != nil {
		c = *cfg
	}
	if c.MaxCount <= 0 {
		c.MaxCount = DefaultMaxCount
	}
	if c.MaxWeight <= 0 {
		c.MaxWeight = DefaultMaxWeight
	}
	if c.Runners <= 0 {
		c.Runners = DefaultRunners
	}
	r := &Runner[Req, Resp]{
		cfg:     c,
		run:     run,
		queue:   make(chan *Call[Req, Resp]),
		quit:    make(chan struct{}),
		busy:    make([]atomic.Int64, c.Runners),
		started: make(chan struct{}, 1),
		epoch:   time.Now(),
	}
	r.pool.New = func() any { return &Call[Req, Resp]{done: make(chan answer[Resp], 1)} }
	return r
}

// Start starts the runner goroutines. Call it once.
func (r *Runner[Req, Resp]) Start() {
	for i := range r.cfg.Runners {
		r.wg.Add(1)
		go r.loop(i)
	}
	if r.cfg.Spare > 0 {
		r.wg.Add(1)
		go r.spare()
	}
}

// Stop makes the runners finish the batch they run and exit; callers not
// yet taken into a batch get ErrStopped. It returns once every runner has
// exited (answers the run function deferred may still be pending). It is
// idempotent.
func (r *Runner[Req, Resp]) Stop() {
	r.stopOnce.Do(func() { close(r.quit) })
	r.wg.Wait()
}

// Submit queues req with the given weight and returns its answer. It
// returns ctx's error if ctx ends before a runner takes the request, and
// ErrStopped if the Runner stops first.
func (r *Runner[Req, Resp]) Submit(ctx context.Context, req Req, weight int) (Resp, error) {
	var zero Resp
	select {
	case <-r.quit:
		return zero, ErrStopped
	default:
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := r.pool.Get().(*Call[Req, Resp])
	c.Req, c.Weight, c.ctx = req, weight, ctx
	select {
	case r.queue <- c:
	case <-r.quit:
		r.put(c)
		return zero, ErrStopped
	case <-ctx.Done():
		r.put(c)
		return zero, ctx.Err()
	}
	if r.cfg.ReturnOnCancel {
		select {
		case a := <-c.done:
			r.put(c)
			return a.resp, a.err
		case <-ctx.Done():
			// The Call is still owned by the batch: not reused.
			return zero, ctx.Err()
		}
	}
	a := <-c.done
	r.put(c)
	return a.resp, a.err
}

func (r *Runner[Req, Resp]) put(c *Call[Req, Resp]) {
	var zero Req
	c.Req, c.ctx = zero, nil
	r.pool.Put(c)
}

// loop gathers and runs batches until Stop; i is the runner's index.
func (r *Runner[Req, Resp]) loop(i int) {
	defer r.wg.Done()
	batch := make([]*Call[Req, Resp], 0, min(r.cfg.MaxCount, 1024))
	var next *Call[Req, Resp]
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-r.queue:
			case <-r.quit:
				return
			}
		}
		batch, next = r.gather(append(batch[:0], first))
		if r.cfg.Spare > 0 {
			r.busy[i].Store(int64(time.Since(r.epoch)) + 1)
			select {
			case r.started <- struct{}{}:
			default:
			}
		}
		r.runLive(batch)
		if r.cfg.Spare > 0 {
			r.busy[i].Store(0)
		}
		clear(batch)
		if r.stopping(next) {
			return
		}
	}
}

// stopping reports whether Stop was called, and then answers next (a
// request Admit refused, not yet run; nil for none) with ErrStopped.
func (r *Runner[Req, Resp]) stopping(next *Call[Req, Resp]) bool {
	select {
	case <-r.quit:
		if next != nil {
			var zero Resp
			next.Answer(zero, ErrStopped)
		}
		return true
	default:
		return false
	}
}

// spare waits for a runner to begin a batch, gives it Config.Spare, and
// while every runner is still busy with a batch older than that, gathers and
// runs batches itself.
func (r *Runner[Req, Resp]) spare() {
	defer r.wg.Done()
	batch := make([]*Call[Req, Resp], 0, min(r.cfg.MaxCount, 1024))
	timer := time.NewTimer(r.cfg.Spare)
	timer.Stop()
	defer timer.Stop()
	armed := false // a start signal was taken: give that batch Spare
	for {
		if !armed {
			select {
			case <-r.started:
			case <-r.quit:
				return
			}
		}
		armed = false
		timer.Reset(r.cfg.Spare)
		select {
		case <-timer.C:
		case <-r.quit:
			return
		}
		for !armed && r.stuck() {
			var first *Call[Req, Resp]
			select {
			case first = <-r.queue:
			case <-r.quit:
				return
			case <-r.started:
				// A runner began a new batch: it gets its Spare before the
				// spare takes more (the signal is not lost).
				armed = true
				continue
			}
			for first != nil {
				var next *Call[Req, Resp]
				batch, next = r.gather(append(batch[:0], first))
				r.runLive(batch)
				clear(batch)
				if r.stopping(next) {
					return
				}
				first = next
			}
		}
	}
}

// stuck reports whether every runner has been running its batch for longer
// than Config.Spare.
func (r *Runner[Req, Resp]) stuck() bool {
	before := int64(time.Since(r.epoch)-r.cfg.Spare) + 1
	for i := range r.busy {
		if b := r.busy[i].Load(); b == 0 || b > before {
			return false
		}
	}
	return true
}

// gather adds queued requests to batch (which holds the first one). It
// returns the batch and the request refused by the Admit filter, if any.
func (r *Runner[Req, Resp]) gather(batch []*Call[Req, Resp]) ([]*Call[Req, Resp], *Call[Req, Resp]) {
	var admit func(Req) bool
	if r.cfg.Admit != nil {
		admit = r.cfg.Admit()
		admit(batch[0].Req)
	}
	weight := batch[0].Weight
	yields := 0
	for len(batch) < r.cfg.MaxCount && weight < r.cfg.MaxWeight {
		select {
		case c := <-r.queue:
			if admit != nil && !admit(c.Req) {
				return batch, c
			}
			batch = append(batch, c)
			weight += c.Weight
		default:
			if yields >= r.cfg.Yields {
				return batch, nil
			}
			yields++
			runtime.Gosched()
		}
	}
	return batch, nil
}

// runLive answers the calls whose context is done and runs the others.
func (r *Runner[Req, Resp]) runLive(batch []*Call[Req, Resp]) {
	live := make([]*Call[Req, Resp], 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			var zero Resp
			c.Answer(zero, err)
			continue
		}
		live = append(live, c)
	}
	if len(live) > 0 {
		r.run(live)
	}
}
