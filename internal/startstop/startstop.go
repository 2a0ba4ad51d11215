// Package startstop is the one lifecycle every background service of idem
// shares (after River's startstop): Start(ctx) launches the service's
// goroutine, Stop() cancels it and waits until it has returned, and the
// Started and Stopped channels let callers and tests wait on those events
// instead of sleeping. Stop is safe to call twice, concurrently, or without
// Start; a stopped service may be started again.
//
// A service embeds BaseStartStop and writes its Start as:
//
//	func (s *Service) Start(ctx context.Context) error {
//		ctx, shouldStart, started, stopped := s.StartInit(ctx)
//		if !shouldStart {
//			return nil
//		}
//		go func() {
//			started()
//			defer stopped()
//			s.run(ctx)
//		}()
//		return nil
//	}
package startstop

import (
	"context"
	"errors"
	"sync"
)

// Service is what every background component implements.
type Service interface {
	// Start launches the service; it returns at once. Cancelling ctx stops
	// the service like Stop, without waiting for it.
	Start(ctx context.Context) error
	// Stop ends the service and waits until its goroutine has returned.
	Stop()
	// Started is closed once the service's goroutine runs.
	Started() <-chan struct{}
	// Stopped is closed once the service's goroutine has returned.
	Stopped() <-chan struct{}
}

// ErrStop is the cause of a service context cancelled by Stop.
var ErrStop = errors.New("service stopped")

// BaseStartStop implements Stop, Started and Stopped for a service that
// calls StartInit in its Start. The zero value is ready to use.
type BaseStartStop struct {
	mu      sync.Mutex
	cancel  context.CancelCauseFunc
	live    bool // between StartInit and the stopped call
	started chan struct{}
	stopped chan struct{}
	// startedClosed and stoppedClosed say the channels belong to a past run.
	startedClosed, stoppedClosed bool
}

// StartInit prepares a run. shouldStart is false when the service already
// runs (then Start must return without starting anything). Otherwise ctx is
// the service's context, cancelled by Stop, and the service's goroutine must
// call started when it begins and stopped when it returns.
func (b *BaseStartStop) StartInit(ctx context.Context) (svcCtx context.Context, shouldStart bool, started, stopped func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live {
		return ctx, false, nil, nil
	}
	if b.started == nil || b.startedClosed {
		b.started, b.startedClosed = make(chan struct{}), false
	}
	if b.stopped == nil || b.stoppedClosed {
		b.stopped, b.stoppedClosed = make(chan struct{}), false
	}
	svcCtx, b.cancel = context.WithCancelCause(ctx)
	b.live = true
	startedCh, stoppedCh := b.started, b.stopped
	started = func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if startedCh == b.started && !b.startedClosed {
			b.startedClosed = true
			close(startedCh)
		}
	}
	stopped = func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.live = false
		b.stoppedClosed = true
		close(stoppedCh)
	}
	return svcCtx, true, started, stopped
}

// Stop cancels the service's context and waits until its goroutine has
// returned. It does nothing when the service does not run.
func (b *BaseStartStop) Stop() {
	b.mu.Lock()
	cancel, live, stopped := b.cancel, b.live, b.stopped
	b.cancel = nil
	b.mu.Unlock()
	if cancel != nil {
		cancel(ErrStop)
	}
	if live {
		<-stopped
	}
}

// Started returns a channel closed once the current (or next) run begins.
func (b *BaseStartStop) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started == nil {
		b.started = make(chan struct{})
	}
	return b.started
}

// Stopped returns a channel closed once the current (or next) run ends.
func (b *BaseStartStop) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped == nil {
		b.stopped = make(chan struct{})
	}
	return b.stopped
}
