package storetest_test

import (
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
	"github.com/idem-dev/idem/store/storetest"
)

// Temporary: run the suite against sqlitestore until it has its own conformance_test.go.
func TestConformanceSQLiteTmp(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "idem.db"), nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
