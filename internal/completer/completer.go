// Package completer writes the finishes of executed jobs in batches: the
// finishes handed over by concurrent executors at one moment go to the store
// in one JobFinishMany call (an internal/batch runner gathers them), and
// whole-batch failures are retried a few times. A finish the store refuses
// for its data does not fail the others of its batch (the batch is split
// until it is alone) and ends its job dead with RefusedError, rather than
// leaving it to the rescuer to run again. Submit does not wait for
// the write (only for room, while Pending finishes are queued), so a worker
// slot is free at once (the job keeps its lease until the commit, so nothing
// else can claim it meanwhile). After each written batch the completer tells
// Config.Finished which jobs it finished (local wake-ups of
// idem.Client.JobWait).
package completer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/batch"
	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/internal/testsignal"
	"github.com/idem-dev/idem/store"
)

// Defaults and limits of a Completer.
const (
	// Loops is how many batches are written at once (besides the spare
	// loop's, below). One: while a batch is written the next one gathers
	// everything that arrives, so batches are as large as the store's
	// latency allows. With two in
	// flight each was half as large, and PostgreSQL paid twice the
	// statements and commits for the same jobs (plain work 0.73–0.79× →
	// 0.95–1.04× River's with one, BENCHMARKS.md, eleventh session).
	// A batch that waits longer than SpareAfter (on a row lock held by
	// another transaction, say) does not hold back the Client's other
	// finishes: a spare loop writes them meanwhile.
	Loops = 1
	// SpareAfter is how long the loop's batch runs before the spare loop
	// takes the finishes queued behind it (internal/batch Config.Spare;
	// between SpareAfter and about twice that). On PostgreSQL this holds
	// while the store has a group-commit worker free: a stuck batch of 64
	// finishes or fewer holds one of its two, and after FinishTimeout its
	// retry takes the other (the first transaction still waits on the
	// lock), so the others wait again.
	SpareAfter = 500 * time.Millisecond
	// MaxBatch is the most finishes in one store call.
	MaxBatch = 500
	// Pending is the most finishes submitted and not yet answered: one
	// batch being written and a full one gathering behind it, so each
	// store round trip can write MaxBatch. (While a full batch is stuck,
	// the spare loop has the other MaxBatch.)
	Pending = (Loops + 1) * MaxBatch
	// FinishTries is how often a failed batch is tried before its jobs are
	// left to the rescuer (more while the store is unavailable:
	// UnavailableFor).
	FinishTries = 5
	// FinishTimeout bounds one JobFinishMany call.
	FinishTimeout = 30 * time.Second
	// UnavailableFor is how long a batch that fails because the store is
	// unavailable (store.Classify) is tried, FinishTries at least.
	UnavailableFor = 30 * time.Second
)

// Finisher is the store call the completer makes.
type Finisher interface {
	JobFinishMany(ctx context.Context, p []*store.JobFinishParams) ([]error, error)
}

// Config configures a Completer.
type Config struct {
	// Logger receives the outcome of finishes that failed; default
	// slog.Default().
	Logger *slog.Logger
	// Finished, when set, is told the ids of the jobs of each batch that were
	// written; it must not block.
	Finished func(ids []int64)
}

// Completer batches finishes. Start it before Submit; Stop drains it.
type Completer struct {
	startstop.BaseStartStop
	store    Finisher
	logger   *slog.Logger
	finished func(ids []int64)
	runner   *batch.Runner[*submitted, struct{}]
	slots    chan struct{} // one per finish submitted and not yet answered
	pending  sync.WaitGroup
	drained  chan struct{} // closed once Stop has written what was submitted
	// abort ends the store calls of the batches in flight and fails those
	// not tried yet (ErrAbandoned): cancelled when Drain's context ends.
	abort    context.Context
	abortNow context.CancelFunc

	mu      sync.RWMutex // guards started and closed against Submit and Start
	started bool
	closed  bool

	// TestSignals tell tests about batches; inert unless initialised.
	TestSignals struct {
		Flushed testsignal.Signal[int] // a batch of this many finishes was written
	}
}

// New returns a completer writing to st; cfg may be nil.
func New(st Finisher, cfg *Config) *Completer {
	c := &Completer{store: st, logger: slog.Default(),
		slots: make(chan struct{}, Pending), drained: make(chan struct{})}
	c.abort, c.abortNow = context.WithCancel(context.Background())
	if cfg != nil {
		if cfg.Logger != nil {
			c.logger = cfg.Logger
		}
		c.finished = cfg.Finished
	}
	c.runner = batch.New(&batch.Config[*submitted]{
		MaxCount: MaxBatch, MaxWeight: MaxBatch, Runners: Loops, Spare: SpareAfter,
	}, c.run)
	return c
}

// Start launches the batching loop. A completer runs once: after Stop,
// Start does nothing.
func (c *Completer) Start(ctx context.Context) error {
	_, shouldStart, started, stopped := c.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	c.mu.Lock()
	if !c.closed && !c.started {
		c.started = true
		c.runner.Start()
	}
	c.mu.Unlock()
	go func() {
		started()
		defer stopped()
		<-c.drained
	}()
	return nil
}

// Submit queues one finish without waiting for it; the completer logs its
// outcome. It blocks only while Pending finishes are waiting to be
// written. A finish submitted after Stop is dropped (its lease was released
// at shutdown).
func (c *Completer) Submit(p *store.JobFinishParams) { c.SubmitThen(p, nil, nil) }

// submitted is one finish handed to the runner, with the call to make
// once it is written.
type submitted struct {
	p       *store.JobFinishParams
	written func()
}

// SubmitThen is Submit that calls written (when not nil) once the finish
// is written — only then, before Config.Finished is told, so that whoever
// waits for the job sees what written did — and then (when not nil) once
// the finish is written, failed or dropped. When the store refused the
// finish and a dead one was written in its place, p holds the dead finish
// by the time written runs. The producer uses then to renew the job's
// lease until the end (the job is still leased to this process while its
// finish waits to be written) and written to report the finish to the
// Client's observer: only what committed is counted.
func (c *Completer) SubmitThen(p *store.JobFinishParams, written, then func()) {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		c.logger.Info("finish dropped: client stopped", "job", p.ID)
		if then != nil {
			then()
		}
		return
	}
	c.pending.Add(1) // before Stop can Wait: it sets closed under the write lock
	c.mu.RUnlock()
	c.slots <- struct{}{}
	go func() {
		defer c.pending.Done()
		// The runner answers ErrStopped only when it never started.
		_, err := c.runner.Submit(context.Background(), &submitted{p: p, written: written}, 1)
		<-c.slots
		c.report(p, err)
		if then != nil {
			then()
		}
	}()
}

// ErrAbandoned answers the finishes still unwritten when Drain's context
// ended: their jobs are left to the rescuer.
var ErrAbandoned = errors.New("completer stopped before the finish was written")

// Stop waits for submitted finishes to be written (each batch tried
// FinishTries times); idempotent, and safe without Start.
func (c *Completer) Stop() { c.Drain(context.Background()) }

// Drain is Stop bounded by ctx: when ctx ends first, the store calls in
// flight are cancelled and the finishes still unwritten are answered
// ErrAbandoned and logged; their jobs are left to the rescuer (their leases
// expire). A second call, or Stop, waits for the first.
func (c *Completer) Drain(ctx context.Context) {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	if !c.started {
		c.runner.Stop() // nothing will write: answer waiting submits
	}
	c.mu.Unlock()
	if first {
		written := make(chan struct{})
		go func() { c.pending.Wait(); close(written) }()
		select {
		case <-written:
		case <-ctx.Done():
			select {
			case <-written:
			default:
				c.logger.Warn("finishes not written by the end of shutdown; the rescuer will retry their jobs",
					"finishes", len(c.slots), "err", context.Cause(ctx))
				c.abortNow()
				<-written // the aborted batches answer at once
			}
		}
		c.runner.Stop()
		c.abortNow()
		close(c.drained)
	}
	c.BaseStartStop.Stop()
}

// report logs the outcome of one finish that failed.
func (c *Completer) report(p *store.JobFinishParams, err error) {
	switch {
	case err == nil:
	case errors.Is(err, idemtype.ErrLeaseLost):
		c.logger.Info("finish dropped: lease lost", "job", p.ID)
	case errors.Is(err, ErrAbandoned):
		c.logger.Info("finish abandoned at shutdown; the rescuer will retry the job", "job", p.ID)
	default:
		c.logger.Error("finish failed; the rescuer will retry the job", "job", p.ID, "err", err)
	}
}

// run writes one batch gathered by the runner (the finishes queued at that
// moment, up to MaxBatch) and answers each finish with its own outcome.
func (c *Completer) run(calls []*batch.Call[*submitted, struct{}]) {
	ps := make([]*store.JobFinishParams, len(calls))
	for i, call := range calls {
		ps[i] = call.Req.p
	}
	errs := c.flush(ps)
	var done []int64
	for i, call := range calls {
		if errs[i] == nil && call.Req.written != nil {
			call.Req.written()
		}
		if errs[i] == nil && c.finished != nil {
			done = append(done, call.Req.p.ID)
		}
		call.Answer(struct{}{}, errs[i])
	}
	if len(done) > 0 {
		c.finished(done)
	}
	c.TestSignals.Flushed.Signal(len(calls))
}

// flush writes one batch and returns each finish's error. A batch the store
// refuses for its data (store.Refused: PostgreSQL fails the whole statement
// over one value it cannot hold) is split in halves until the refused
// finishes are alone, so the others are written; each refused finish is
// replaced by a dead one (settleRefused) instead of leaving its job to the
// rescuer, which would run it again.
func (c *Completer) flush(batch []*store.JobFinishParams) []error {
	errs, err := c.write(batch)
	if err == nil {
		if len(errs) != len(batch) { // a store answering no per-finish errors: none failed
			errs = append(errs, make([]error, len(batch)-min(len(errs), len(batch)))...)[:len(batch)]
		}
		c.settleRefused(batch, errs)
		return errs
	}
	refused := store.Refused(c.store, err)
	if refused && len(batch) > 1 {
		c.logger.Warn("finish batch refused for its data; splitting it", "jobs", len(batch), "err", err)
		half := len(batch) / 2
		return append(c.flush(batch[:half]), c.flush(batch[half:])...)
	}
	errs = make([]error, len(batch))
	for i := range errs {
		errs[i] = err
	}
	if refused {
		c.settleRefused(batch, errs)
	}
	return errs
}

// write makes one JobFinishMany call for batch, retrying whole-batch
// failures (not a refusal: the same data is refused again): FinishTries
// times, and while the store is unavailable (a lost connection, a database
// restarting) for up to UnavailableFor, so that a handler's work is not
// thrown away and run again for want of one write. A retried finish that
// had committed is accepted as the same completion. It returns the last
// try's per-finish and whole-batch errors. Once Drain aborts, it stops
// trying and answers ErrAbandoned.
func (c *Completer) write(batch []*store.JobFinishParams) ([]error, error) {
	var errs []error
	var err error
	start := time.Now()
	for try := 0; ; try++ {
		if c.abort.Err() != nil {
			return nil, ErrAbandoned
		}
		ctx, cancel := context.WithTimeout(c.abort, FinishTimeout)
		errs, err = c.store.JobFinishMany(ctx, batch)
		cancel()
		if err == nil || store.Refused(c.store, err) {
			return errs, err
		}
		if c.abort.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ErrAbandoned, err)
		}
		unavailable := errors.Is(store.Classify(c.store, err), idemtype.ErrUnavailable)
		if try+1 >= FinishTries && (!unavailable || time.Since(start) >= UnavailableFor) {
			return errs, err
		}
		c.logger.Warn("finish batch failed", "jobs", len(batch), "try", try+1, "unavailable", unavailable, "err", err)
		select { // backoff before the next try
		case <-time.After(min(time.Duration(try+1)*100*time.Millisecond, time.Second)):
		case <-c.abort.Done():
		}
	}
}

// RefusedError starts the error of an attempt whose finish the store
// refused for its data (store.Refused); the rest says why. Its job is dead
// (it keeps no result): running it again would repeat work that was done.
const RefusedError = "finish refused by the store: "

// settleRefused writes, in place of each finish of batch that errs says the
// store refused for its data, a dead finish of the attempt with
// RefusedError, and answers it with that write's outcome.
func (c *Completer) settleRefused(batch []*store.JobFinishParams, errs []error) {
	var dead []*store.JobFinishParams
	var at []int
	for i, e := range errs {
		if !store.Refused(c.store, e) {
			continue
		}
		p := batch[i]
		c.logger.Error("finish refused by the store; the job is dead", "job", p.ID, "err", e)
		dead = append(dead, &store.JobFinishParams{ID: p.ID, LeaseToken: p.LeaseToken,
			State: idemtype.StateDead, Outcome: idemtype.OutcomeDead,
			Error:      store.StorableError(RefusedError + e.Error()),
			FinishedAt: p.FinishedAt, DurationMS: p.DurationMS, HTTPStatus: p.HTTPStatus,
			Target: store.StorableText(p.Target)})
		at = append(at, i)
	}
	if len(dead) == 0 {
		return
	}
	es, err := c.write(dead)
	for k, i := range at {
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("%w; its dead finish failed: %w", errs[i], err)
		case es[k] != nil:
			errs[i] = fmt.Errorf("%w; its dead finish failed: %w", errs[i], es[k])
		default:
			errs[i] = nil
			*batch[i] = *dead[k] // what was written, for SubmitThen's written
		}
	}
}
