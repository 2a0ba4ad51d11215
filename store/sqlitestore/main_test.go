package sqlitestore

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every Store's writer goroutine stops on Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
