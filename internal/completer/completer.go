// Package completer writes the finishes of executed jobs in batches: the
// finishes handed over by concurrent executors at one moment go to the store
// in one JobFinishMany call, and whole-batch failures are retried a few
// times. Submit never waits for the write, so a worker slot is free at once
// (the job keeps its lease until the commit, so nothing else can claim it
// meanwhile). After each written batch the completer tells Config.Finished
// which jobs it finished (local wake-ups of idem.Client.JobWait).
package completer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/internal/testsignal"
	"github.com/idem-dev/idem/store"
)

// Defaults and limits of a Completer.
const (
	// Loops is how many batches may be in flight at once.
	Loops = 2
	// MaxBatch is the most finishes in one store call.
	MaxBatch = 500
	// FinishTries is how often a failed batch is tried before its jobs are
	// left to the rescuer.
	FinishTries = 5
	// FinishTimeout bounds one JobFinishMany call.
	FinishTimeout = 30 * time.Second
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
	reqs     chan *store.JobFinishParams
	wg       sync.WaitGroup

	mu     sync.RWMutex // guards closed against sends on a closed reqs
	closed bool

	// TestSignals tell tests about batches; inert unless initialised.
	TestSignals struct {
		Flushed testsignal.Signal[int] // a batch of this many finishes was written
	}
}

// New returns a completer writing to st; cfg may be nil.
func New(st Finisher, cfg *Config) *Completer {
	c := &Completer{store: st, logger: slog.Default(), reqs: make(chan *store.JobFinishParams, MaxBatch)}
	if cfg != nil {
		if cfg.Logger != nil {
			c.logger = cfg.Logger
		}
		c.finished = cfg.Finished
	}
	return c
}

// Start launches the batching loops. A completer runs once: after Stop,
// Start does nothing.
func (c *Completer) Start(ctx context.Context) error {
	_, shouldStart, started, stopped := c.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	c.mu.RLock()
	closed := c.closed
	c.mu.RUnlock()
	for range Loops {
		c.wg.Add(1)
		go c.loop()
	}
	go func() {
		started()
		defer stopped()
		if !closed {
			c.wg.Wait()
		}
	}()
	return nil
}

// Submit queues one finish without waiting for it; the completer logs its
// outcome. A finish submitted after Stop is dropped (its lease was released
// at shutdown).
func (c *Completer) Submit(p *store.JobFinishParams) {
	if !c.enqueue(p) {
		c.logger.Info("finish dropped: client stopped", "job", p.ID)
	}
}

func (c *Completer) enqueue(p *store.JobFinishParams) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.reqs <- p
	return true
}

// Stop waits for queued finishes to be written; idempotent, and safe
// without Start.
func (c *Completer) Stop() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	c.BaseStartStop.Stop()
}

// report logs the outcome of one finish that failed.
func (c *Completer) report(p *store.JobFinishParams, err error) {
	switch {
	case err == nil:
	case errors.Is(err, idemtype.ErrLeaseLost):
		c.logger.Info("finish dropped: lease lost", "job", p.ID)
	default:
		c.logger.Error("finish failed; the rescuer will retry the job", "job", p.ID, "err", err)
	}
}

// loop gathers what is queued into batches until Stop closes reqs.
// TODO(batch): use internal/batch
func (c *Completer) loop() {
	defer c.wg.Done()
	for first := range c.reqs {
		batch := []*store.JobFinishParams{first}
	drain:
		for len(batch) < MaxBatch {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		c.flush(batch)
	}
}

// flush writes one batch, retrying whole-batch failures a few times.
func (c *Completer) flush(batch []*store.JobFinishParams) {
	var errs []error
	var err error
	for try := range FinishTries {
		ctx, cancel := context.WithTimeout(context.Background(), FinishTimeout)
		errs, err = c.store.JobFinishMany(ctx, batch)
		cancel()
		if err == nil {
			break
		}
		c.logger.Warn("finish batch failed", "jobs", len(batch), "try", try+1, "err", err)
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond) // backoff before the next try
	}
	var done []int64
	for i, p := range batch {
		switch {
		case err != nil:
			c.report(p, err)
		case i < len(errs) && errs[i] != nil:
			c.report(p, errs[i])
		case c.finished != nil:
			done = append(done, p.ID)
		}
	}
	if len(done) > 0 {
		c.finished(done)
	}
	c.TestSignals.Flushed.Signal(len(batch))
}
