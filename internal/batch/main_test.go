package batch

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every Runner's goroutines stop on Stop and that no
// caller is left waiting for an answer.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
