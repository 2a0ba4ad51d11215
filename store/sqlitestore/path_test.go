package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenPathWithURICharacters: a path holding '#', '?' or '%' opens that
// very file (not a name cut at the URI fragment or query).
func TestOpenPathWithURICharacters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "seed#3?x=1%20.db")
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at %s: %v", path, err)
	}
}
