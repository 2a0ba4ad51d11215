package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenPathWithURICharacters: a path with '#', '?' or '%' opens that
// very file, not a truncated one.
func TestOpenPathWithURICharacters(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a#1?b%20c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "idem.db")
	st, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not at %s: %v", path, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "a")); err == nil {
		t.Errorf("a truncated path was opened")
	}
}
