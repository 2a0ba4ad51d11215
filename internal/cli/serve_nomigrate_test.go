package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestServeNoMigrateOnEmptyDatabase: `idem serve --no-migrate` on a
// database without idem's schema (an empty SQLite file, a PostgreSQL
// schema never migrated) stops at start with exit code 3, a message saying
// the schema is not migrated and a hint to run `idem migrate`. It once
// failed with the store's raw "list api keys: … no such table" (SQLite)
// or "relation … does not exist" (PostgreSQL), exit 1, without a hint.
// On a SQLite file that does not exist it stops the same way (exit 3, a
// hint to run `idem migrate --create`) and creates nothing: it created an
// empty file first, which a later `idem migrate` without --create took
// for the database.
func TestServeNoMigrateOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	noSchema := []string{"idem: the database has no idem schema", "hint: run `idem migrate"}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "idem.db")
		if err := os.WriteFile(db, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		serveNoMigrateFails(t, nil, noSchema, "--database", db)
	})
	t.Run("sqlite file missing", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db := filepath.Join(dir, "idem.db")
		serveNoMigrateFails(t, nil, []string{"idem: no database at " + db, "hint: run `idem migrate --create`"}, "--database", db)
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Fatalf("the directory holds %v (%v), want nothing created", ents, err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url, schema := dbtest.NewSchema(t)
		serveNoMigrateFails(t, []string{envSchema + "=" + schema}, noSchema, "--database", url)
	})
}

// serveNoMigrateFails runs `idem serve --no-migrate` as a real process and
// checks how it fails: exit 3, stderr holding each of wants.
func serveNoMigrateFails(t *testing.T, env, wants []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"serve", "--no-migrate", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), "IDEM_CLI_MAIN=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitNotFound {
		t.Fatalf("idem serve --no-migrate on an empty database: %v, want exit %d\nstdout: %s\nstderr: %s", err, ExitNotFound, stdout.String(), stderr.String())
	}
	errs := stderr.String()
	for _, want := range wants {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(stdout.String(), "admin") {
		t.Errorf("stdout: %s", stdout.String())
	}
}
