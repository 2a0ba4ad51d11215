// Package maintenance holds the background services that keep the job tables
// healthy: the rescuer (expired leases), the promoter (due scheduled jobs)
// and retention (old jobs, expired idempotency records), and the scheduler
// (firings of stored schedules, with their Plan). They run on the
// elected leader only and share one lifecycle shape (internal/startstop):
// NewX(store, *Config), Start(ctx), RunOnce(ctx) for tests, an idempotent
// Stop, and a test signal after each run.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/internal/testsignal"
)

// loop runs fn every interval until stopped; fn runs only while gate allows.
type loop struct {
	startstop.BaseStartStop
	name     string
	interval time.Duration
	logger   *slog.Logger
	gate     func() bool
	fn       func(ctx context.Context) (int, error)
	// onRun is told of each run (Config.OnRun); nil = not told.
	onRun func(service string, rows int, err error)

	// TestSignals tell tests about runs; inert unless initialised.
	TestSignals struct {
		Ran testsignal.Signal[int] // a run touched this many rows (-1: skipped, not leader)
	}
}

// Start runs the service in the background until Stop; a second Start while
// running is a no-op.
func (l *loop) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := l.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	go func() {
		started()
		defer stopped()
		l.run(ctx)
	}()
	return nil
}

func (l *loop) run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.gate != nil && !l.gate() {
			l.TestSignals.Ran.Signal(-1)
			continue
		}
		n, err := l.fn(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			l.logger.Warn("maintenance failed", "service", l.name, "err", err)
		case n > 0:
			l.logger.Debug("maintenance", "service", l.name, "rows", n)
		}
		if l.onRun != nil && ctx.Err() == nil {
			l.onRun(l.name, n, err)
		}
		l.TestSignals.Ran.Signal(n)
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
