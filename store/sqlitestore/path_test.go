package sqlitestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemtype"
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

// TestOpenFileURI: a "file:" URI (docs/operations.md accepts one) opens
// the file it names, absolute or relative, escapes decoded, with every
// feature of a plain path (lock files and the WAL fsync beside it); a
// query or fragment is refused naming it (idem sets its own pragmas),
// rather than failing with SQLite's "unable to open database file".
func TestOpenFileURI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "uri db.db")
	s, err := Open(ctx, "file:"+strings.ReplaceAll(path, " ", "%20"), nil)
	if err != nil {
		t.Fatalf("open file: URI: %v", err)
	}
	s.Close()
	for _, name := range []string{path, path + "-idem.lock"} {
		if _, err := os.Stat(name); err != nil {
			t.Fatalf("%s: %v (the URI's file and its lock file)", name, err)
		}
	}
	s, err = Open(ctx, "file://"+path, nil)
	if err != nil {
		t.Fatalf("open file:// URI: %v", err)
	}
	s.Close()
	for _, bad := range []string{"file:" + path + "?mode=ro", "file:" + path + "#x", "file://otherhost" + path} {
		if s, err := Open(ctx, bad, nil); err == nil {
			s.Close()
			t.Fatalf("open %s: accepted", bad)
		} else if !errors.Is(err, idemtype.ErrInvalid) {
			t.Fatalf("open %s: %v; want ErrInvalid naming what is refused", bad, err)
		}
	}
}
