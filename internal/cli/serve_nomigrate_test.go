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
func TestServeNoMigrateOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "idem.db")
		serveNoMigrateFails(t, nil, "--database", db)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url, schema := dbtest.NewSchema(t)
		serveNoMigrateFails(t, []string{envSchema + "=" + schema}, "--database", url)
	})
}

// serveNoMigrateFails runs `idem serve --no-migrate` as a real process and
// checks how it fails.
func serveNoMigrateFails(t *testing.T, env []string, args ...string) {
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
	for _, want := range []string{"idem: the database has no idem schema", "hint: run `idem migrate"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(stdout.String(), "admin") {
		t.Errorf("stdout: %s", stdout.String())
	}
}
