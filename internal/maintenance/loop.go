// Package maintenance holds the background services that keep the job tables
// healthy: the rescuer (expired leases), the promoter (due scheduled jobs)
// and retention (old jobs, expired idempotency records). They run on the
// elected leader only and share one lifecycle shape: NewX(store, *Config),
// Start(ctx), RunOnce(ctx) for tests, and an idempotent Stop.
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// loop runs fn every interval until stopped; fn runs only while gate allows.
type loop struct {
	name     string
	interval time.Duration
	logger   *slog.Logger
	gate     func() bool
	fn       func(ctx context.Context) (int, error)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the service in the background until Stop; a second Start while
// running is a no-op.
func (l *loop) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go l.run(ctx, l.done)
}

func (l *loop) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.gate != nil && !l.gate() {
			continue
		}
		n, err := l.fn(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			l.logger.Warn("maintenance failed", "service", l.name, "err", err)
		case n > 0:
			l.logger.Debug("maintenance", "service", l.name, "rows", n)
		}
	}
}

// Stop ends the service and waits for its current run; idempotent.
func (l *loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
