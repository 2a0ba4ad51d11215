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

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestServeRefusesBadDeliveryBeforeTheDatabase: a bad delivery setting of
// `idem serve` (--deliver-workers 0, an empty name in IDEM_DELIVER_QUEUES)
// stops start-up with exit code 2 before the database is touched. It was
// checked only after the store was opened: a SQLite file was created and
// migrated, and a PostgreSQL schema created and migrated (on an upgrade,
// to a version the running nodes of the older binary do not expect), by
// a start that was then refused.
func TestServeRefusesBadDeliveryBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"workers", nil, []string{"--deliver-workers", "0"}, "--deliver-workers"},
		{"queues", []string{envDeliverQueues + "=emails,,hooks"}, nil, envDeliverQueues},
	} {
		t.Run("sqlite "+c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			serveRefused(t, c.env, c.want, append(c.args, "--database", filepath.Join(dir, "idem.db"))...)
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
				t.Fatalf("a refused start left %v (%v) behind, want nothing created", ents, err)
			}
		})
		t.Run("postgres "+c.name, func(t *testing.T) {
			t.Parallel()
			url, schema := dbtest.NewSchema(t)
			serveRefused(t, append([]string{envSchema + "=" + schema}, c.env...), c.want, append(c.args, "--database", url)...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			if exists {
				t.Fatalf("a refused start created (and migrated) schema %s", schema)
			}
		})
	}
}

// serveRefused runs `idem serve` as a real process with env added and
// checks that it exits 2 with want in its error.
func serveRefused(t *testing.T, env []string, want string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), "IDEM_CLI_MAIN=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitUsage {
		t.Fatalf("idem serve %v: %v, want exit %d\nstdout: %s\nstderr: %s", args, err, ExitUsage, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not name %s:\n%s", want, stderr.String())
	}
	if strings.Contains(stdout.String(), "admin") {
		t.Errorf("a refused start minted an admin key: %s", stdout.String())
	}
}
