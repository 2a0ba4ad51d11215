package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLitePathMistakes: a --database that is a directory, or a file in
// a directory that does not exist, says which and what to do, with the
// documented exit code (2: a bad setting; 3: not found), instead of
// SQLite's "unable to open database file (14)" or a bare ENOENT, exit 1.
func TestSQLitePathMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "idem.db")
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"directory", []string{"serve", "--listen", "127.0.0.1:0", "--database", dir}, ExitUsage,
			[]string{"is a directory", "hint: ", filepath.Join(dir, "idem.db")}},
		{"directory, migrate", []string{"migrate", "--database", dir}, ExitUsage, []string{"is a directory"}},
		{"missing directory", []string{"serve", "--listen", "127.0.0.1:0", "--database", missing}, ExitNotFound,
			[]string{"directory " + filepath.Dir(missing) + " does not exist", "hint: ", "mkdir -p " + filepath.Dir(missing)}},
		{"missing directory, --create", []string{"migrate", "--create", "--database", missing}, ExitNotFound,
			[]string{"does not exist", "mkdir -p"}},
	} {
		_, errs, code := run(t, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, errs)
			}
		}
	}
	if _, err := os.Stat(filepath.Dir(missing)); err == nil {
		t.Error("the missing directory was created")
	}
}
