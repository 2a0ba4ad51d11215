package sqlitetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// dump renders what a database file holds, leaving out only what differs
// between two files migrated at different moments (applied_at): the
// settings kept in the file, the schema and every row of every table. A
// migration or an Open that writes data shows up here, so a copy of the
// template cannot silently diverge from a freshly migrated file.
func dump(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	for _, p := range []string{"user_version", "application_id", "journal_mode", "page_size", "auto_vacuum", "encoding"} {
		var v string
		if err := db.QueryRow("PRAGMA " + p).Scan(&v); err != nil {
			t.Fatalf("PRAGMA %s: %v", p, err)
		}
		fmt.Fprintf(&b, "pragma %s = %s\n", p, v)
	}
	rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var typ, name, tbl, text string
		if err := rows.Scan(&typ, &name, &tbl, &text); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s on %s: %s\n", typ, name, tbl, text)
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for _, table := range tables {
		q := `SELECT * FROM "` + table + `"`
		if table == "schema_migrations" {
			q = `SELECT version, name FROM schema_migrations`
		}
		for _, r := range tableRows(t, db, q) {
			fmt.Fprintf(&b, "row %s: %s\n", table, r)
		}
	}
	return b.String()
}

// tableRows returns the rows q selects, rendered and sorted.
func tableRows(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%q", vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// openClose opens path as a test does, then closes it.
func openClose(t *testing.T, path string) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCopyIsAFreshMigration: a copy, as Path returns it and after a test
// opened and closed it, holds what a new file migrated by sqlitestore.Open
// holds after Close.
func TestCopyIsAFreshMigration(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	openClose(t, fresh)
	if fi, err := os.Stat(fresh + "-wal"); err == nil && fi.Size() > 0 {
		t.Errorf("Close left %d bytes in %s-wal: a copy of the main file would miss them", fi.Size(), fresh)
	}
	if entries, err := os.ReadDir(filepath.Dir(fresh)); err == nil {
		for _, e := range entries {
			fi, _ := e.Info()
			t.Logf("after Close: %s (%d bytes)", e.Name(), fi.Size())
		}
	}
	want := dump(t, fresh)
	if !strings.Contains(want, "row schema_migrations") {
		t.Fatalf("the fresh file has no migrations:\n%s", want)
	}

	copied := sqlitetest.Path(t)
	if got := dump(t, copied); got != want {
		t.Errorf("copy differs from a fresh migration:\ncopy:\n%s\nfresh:\n%s", got, want)
	}
	openClose(t, copied)
	if got := dump(t, copied); got != want {
		t.Errorf("copy, opened and closed, differs from a fresh migration:\ncopy:\n%s\nfresh:\n%s", got, want)
	}
}

// TestPathsAreNewPrivateFiles: each call gives its own file, mode 0600 as
// sqlitestore.Open creates one, and a write to one copy is not in another.
func TestPathsAreNewPrivateFiles(t *testing.T) {
	p1, p2 := sqlitetest.Path(t), sqlitetest.Path(t)
	if p1 == p2 {
		t.Fatalf("two calls gave one path %s", p1)
	}
	for _, p := range []string{p1, p2} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	before := dump(t, p2)
	db, err := sql.Open("sqlite", "file:"+p1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (1000000, 'test', 0)`); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dump(t, p1), "test") {
		t.Fatalf("the row written to %s is not in it", p1)
	}
	if dump(t, p2) != before {
		t.Errorf("a row written to one copy shows in another")
	}
}
