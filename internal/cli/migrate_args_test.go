package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateRefusesExtraArguments: `idem migrate up N` and `idem migrate
// status X` are usage errors (exit 2) that change nothing. The argument
// was ignored: `idem migrate up 1`, read as "one version up" by an
// operator used to `migrate down N`, applied every pending migration and
// exited 0; `migrate status X` listed the versions and exited 0.
func TestMigrateRefusesExtraArguments(t *testing.T) {
	t.Parallel()
	wantRefused := func(args []string, code int, errs string) {
		t.Helper()
		if code != ExitUsage || !strings.Contains(errs, "migrate "+args[0]+" takes no argument") || !strings.Contains(errs, "hint: ") {
			t.Errorf("migrate %v: exit %d, stderr %q; want exit %d: `migrate %s takes no argument`", args, code, errs, ExitUsage, args[0])
		}
	}
	db := filepath.Join(t.TempDir(), "idem.db")
	_, errs, code := run(t, "migrate", "up", "1", "--create", "--database", db)
	wantRefused([]string{"up", "1"}, code, errs)
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("migrate up 1 created (and migrated) %s: %v", db, err)
	}
	url, _ := dbtest.NewSchema(t) // the default schema: status only reads
	_, errs, code = run(t, "migrate", "status", "x", "--database", url)
	wantRefused([]string{"status", "x"}, code, errs)
}
