package testsignal_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/testsignal"
)

func TestSignal(t *testing.T) {
	t.Parallel()
	var inert testsignal.Signal[int]
	inert.Signal(1) // not initialised: a no-op that never blocks
	var s testsignal.Signal[string]
	s.Init()
	s.Signal("a")
	s.Signal("b")
	if got := s.WaitOrTimeout(t); got != "a" {
		t.Fatalf("got %q", got)
	}
	if got := s.WaitOrTimeout(t); got != "b" {
		t.Fatalf("got %q", got)
	}
}
