package webhook

import (
	"context"
	"errors"
	"testing"
	"time"
)

func (t *targetSlots) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sems)
}

func TestTargetSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a full target refuses at once without a wait", func(t *testing.T) {
		t.Parallel()
		s := newTargetSlots(2)
		r1, err1 := s.acquire(ctx, "a", -1)
		r2, err2 := s.acquire(ctx, "a", -1)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if _, err := s.acquire(ctx, "a", -1); !errors.Is(err, ErrTargetBusy) {
			t.Fatalf("third slot: %v", err)
		}
		// Another target has its own slots.
		rb, err := s.acquire(ctx, "b", -1)
		if err != nil {
			t.Fatalf("other target: %v", err)
		}
		rb()
		r1()
		r3, err := s.acquire(ctx, "a", -1)
		if err != nil {
			t.Fatalf("after a release: %v", err)
		}
		r2()
		r3()
		if n := s.count(); n != 0 {
			t.Fatalf("%d semaphores kept after every release", n)
		}
	})

	t.Run("a waiter gets the slot a holder gives back", func(t *testing.T) {
		t.Parallel()
		s := newTargetSlots(1)
		release, err := s.acquire(ctx, "a", -1)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			r, err := s.acquire(ctx, "a", time.Minute)
			if err == nil {
				r()
			}
			got <- err
		}()
		release()
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if n := s.count(); n != 0 {
			t.Fatalf("%d semaphores kept", n)
		}
	})

	t.Run("a wait that runs out is busy", func(t *testing.T) {
		t.Parallel()
		s := newTargetSlots(1)
		release, _ := s.acquire(ctx, "a", -1)
		defer release()
		if _, err := s.acquire(ctx, "a", time.Millisecond); !errors.Is(err, ErrTargetBusy) {
			t.Fatalf("timed-out wait: %v", err)
		}
	})

	t.Run("a cancelled caller stops waiting", func(t *testing.T) {
		t.Parallel()
		s := newTargetSlots(1)
		release, _ := s.acquire(ctx, "a", -1)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.acquire(cctx, "a", time.Hour); !errors.Is(err, context.Canceled) || errors.Is(err, ErrTargetBusy) {
			t.Fatalf("cancelled wait: %v", err)
		}
		release()
		if n := s.count(); n != 0 {
			t.Fatalf("%d semaphores kept after a cancelled wait", n)
		}
	})
}

func TestOutcomeTexts(t *testing.T) {
	t.Parallel()
	for c, want := range map[Class]string{ClassCompleted: "completed", ClassRetry: "retry", ClassDead: "dead", 9: "Class(9)"} {
		if c.String() != want {
			t.Errorf("Class %d = %q, want %q", int(c), c.String(), want)
		}
	}
	if got := (&StatusError{Status: 503}).Error(); got != "webhook: target answered 503 Service Unavailable" {
		t.Errorf("StatusError = %q", got)
	}
}
