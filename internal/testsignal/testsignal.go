// Package testsignal lets a service announce events to its tests: the
// service calls Signal after each run (a no-op in production, where the
// signal is never initialised) and the test waits with WaitOrTimeout
// instead of sleeping and polling.
package testsignal

import "time"

// TB is the part of testing.TB a wait needs (kept small so that services
// do not link package testing).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// DefaultTimeout bounds WaitOrTimeout.
const DefaultTimeout = 10 * time.Second

// Signal is one kind of event carrying a value of type T. The zero value is
// inert: Signal does nothing until Init.
type Signal[T any] struct {
	ch chan T
}

// Init arms the signal for a test; call it before the service starts.
func (s *Signal[T]) Init() { s.ch = make(chan T, 1000) }

// Signal announces v without ever blocking (beyond a full buffer the event
// is dropped).
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// WaitOrTimeout returns the next event, failing tb after DefaultTimeout.
func (s *Signal[T]) WaitOrTimeout(tb TB) T {
	tb.Helper()
	if s.ch == nil {
		tb.Fatalf("testsignal: Wait on a signal that was not initialised")
	}
	t := time.NewTimer(DefaultTimeout)
	defer t.Stop()
	select {
	case v := <-s.ch:
		return v
	case <-t.C:
		tb.Fatalf("testsignal: no event within %s", DefaultTimeout)
		var zero T
		return zero
	}
}
