package sqlitestore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/store"
)

// TestFilesArePrivate: the database and its WAL and shared-memory files
// are created readable by the owner only, whatever the umask.
func TestFilesArePrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A write makes sure the WAL exists (migrations already wrote).
	if _, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("k")}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %o, want 600", filepath.Base(p), mode)
		}
	}
}
