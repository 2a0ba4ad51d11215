package startstop_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/internal/startstop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service runs until stopped and counts its runs.
type service struct {
	startstop.BaseStartStop
	mu    sync.Mutex
	runs  int
	cause error
}

func (s *service) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := s.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	go func() {
		started()
		defer stopped()
		s.mu.Lock()
		s.runs++
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		s.cause = context.Cause(ctx)
		s.mu.Unlock()
	}()
	return nil
}

var _ startstop.Service = (*service)(nil)

func TestBaseStartStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("stop without start returns at once", func(t *testing.T) {
		t.Parallel()
		s := &service{}
		s.Stop()
		s.Stop()
	})

	t.Run("start runs once and stop waits for the goroutine", func(t *testing.T) {
		t.Parallel()
		s := &service{}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil { // a second Start is a no-op
			t.Fatal(err)
		}
		<-s.Started()
		s.Stop()
		select {
		case <-s.Stopped():
		default:
			t.Fatal("Stopped not closed after Stop returned")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.runs != 1 || !errors.Is(s.cause, startstop.ErrStop) {
			t.Fatalf("runs %d cause %v", s.runs, s.cause)
		}
	})

	t.Run("stop twice and concurrently", func(t *testing.T) {
		t.Parallel()
		s := &service{}
		_ = s.Start(ctx)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); s.Stop() }()
		}
		wg.Wait()
		s.Stop()
		<-s.Stopped()
	})

	t.Run("channels taken before start see that run", func(t *testing.T) {
		t.Parallel()
		s := &service{}
		started, stopped := s.Started(), s.Stopped()
		_ = s.Start(ctx)
		<-started
		s.Stop()
		<-stopped
	})

	t.Run("a stopped service starts again", func(t *testing.T) {
		t.Parallel()
		s := &service{}
		_ = s.Start(ctx)
		s.Stop()
		_ = s.Start(ctx)
		<-s.Started()
		select {
		case <-s.Stopped():
			t.Fatal("Stopped of the second run closed while it runs")
		default:
		}
		s.Stop()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.runs != 2 {
			t.Fatalf("runs %d, want 2", s.runs)
		}
	})

	t.Run("cancelling the start context stops the service", func(t *testing.T) {
		t.Parallel()
		s := &service{}
		cctx, cancel := context.WithCancel(ctx)
		_ = s.Start(cctx)
		cancel()
		<-s.Stopped()
		s.Stop()
		if s.cause == nil || errors.Is(s.cause, startstop.ErrStop) {
			t.Fatalf("cause %v, want the parent's cancellation", s.cause)
		}
	})
}
