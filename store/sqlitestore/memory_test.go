package sqlitestore

import (
	"context"
	"errors"
	"testing"

	"github.com/idem-dev/idem/idemtype"
)

// TestOpenInMemoryRefused: ":memory:" (and its URI forms), and the empty
// path (a private temporary database), would give the store's writer and
// each reader its own empty database — writes invisible to reads, "no such
// table" — so Open refuses them with ErrInvalid naming the path.
func TestOpenInMemoryRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, path := range []string{":memory:", "file::memory:", "file:%3Amemory%3A", "", "file::memory:?cache=shared", "file:x?mode=memory", "file:/x?vfs=memdb"} {
		s, err := Open(ctx, path, nil)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q): accepted", path)
			continue
		}
		if !errors.Is(err, idemtype.ErrInvalid) {
			t.Errorf("Open(%q): %v; want ErrInvalid", path, err)
		}
	}
}
