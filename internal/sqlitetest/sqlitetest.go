// Package sqlitetest gives tests a new SQLite database file already at the
// current schema: a copy of a file that sqlitestore.Open migrated once per
// test process. Migrating a new file runs every embedded migration, which
// under the race detector costs about 200 ms; copying costs a file write.
//
// A copy is the file as a fresh Open leaves it after Close (see the
// equivalence test), but it is not new: tests of migrations, of what Open
// does on a new file, or of several processes opening one new file must
// keep creating their files themselves.
package sqlitetest

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/filetemplate"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// template is the database migrated once per process. Close checkpoints
// the WAL into the main file and removes it (the last connection closes),
// so the main file alone is the database.
var template = filetemplate.New(func(path string) error {
	st, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		return err
	}
	return st.Close()
}, "-wal")

// Path returns the path of a new SQLite database file, "idem.db" in
// t.TempDir(), holding a copy of a database migrated to the current schema.
// Open it with sqlitestore.Open and whatever Config the test needs.
func Path(t testing.TB) string {
	t.Helper()
	return template.Copy(t, "idem.db")
}
