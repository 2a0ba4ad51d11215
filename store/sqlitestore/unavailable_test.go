package sqlitestore

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestDiskFullIsUnavailable: a real "database or disk is full" error of
// SQLite (a database capped with max_page_count) is a storage failure;
// a constraint violation is not.
func TestDiskFullIsUnavailable(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "full.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (b BLOB); CREATE TABLE u (k INTEGER PRIMARY KEY); INSERT INTO u VALUES (1); PRAGMA max_page_count = 4"); err != nil {
		t.Fatal(err)
	}
	_, full := db.Exec("INSERT INTO t VALUES (?)", []byte(strings.Repeat("x", 1<<20)))
	if full == nil {
		t.Fatal("the capped database took 1 MiB")
	}
	if !s.IsUnavailable(full) || !errors.Is(store.Classify(s, full), idemtype.ErrUnavailable) {
		t.Fatalf("disk full (%v) is not a storage failure", full)
	}
	_, dup := db.Exec("INSERT INTO u VALUES (1)")
	if dup == nil || s.IsUnavailable(dup) || errors.Is(store.Classify(s, dup), idemtype.ErrUnavailable) {
		t.Fatalf("a constraint violation (%v) is a storage failure", dup)
	}
}
