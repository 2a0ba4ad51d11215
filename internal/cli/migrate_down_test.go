package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateDownSaysWhatItRolledBack: `idem migrate down N` reports the
// versions it rolled back, not N: fewer when fewer are applied, 0 on an
// empty schema. Not parallel: the schema name travels in IDEM_PG_SCHEMA.
func TestMigrateDownSaysWhatItRolledBack(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	var res migrateResult
	out, errs, code := run(t, "migrate", "--json", "--database", url)
	// Versions may skip numbers (a number kept for another branch): the
	// steps are counted in migrations applied, not in versions.
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Applied) < 3 {
		t.Fatalf("migrate: %d %q %q", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		want int
	}{{[]string{"down", "2"}, 2}, {[]string{"down", "1000"}, len(res.Applied) - 2}, {[]string{"down"}, 0}} {
		args := append(append([]string{"migrate"}, c.args...), "--database", url)
		out, errs, code := run(t, args...)
		if want := fmt.Sprintf("rolled back %d version(s)\n", c.want); code != 0 || out != want {
			t.Fatalf("migrate %v: %d %q %q, want %q", c.args, code, out, errs, want)
		}
	}
}

// TestMigrateDownRefusesNewerSchema: `idem migrate down N` on a schema a
// newer idem migrated exits 4 with the hint to use the newer binary, and
// rolls back nothing (this binary's newest versions stay under the newer
// one's). Not parallel: the schema name travels in IDEM_PG_SCHEMA.
func TestMigrateDownRefusesNewerSchema(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	if out, errs, code := run(t, "migrate", "--database", url); code != 0 {
		t.Fatalf("migrate: %d %q %q", code, out, errs)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var newest int
	if err := conn.QueryRow(t.Context(), fmt.Sprintf(`SELECT max(version) FROM %s.migrations`, pgx.Identifier{schema}.Sanitize())).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), fmt.Sprintf(`INSERT INTO %s.migrations (version, name) VALUES ($1, 'from_a_newer_binary')`,
		pgx.Identifier{schema}.Sanitize()), newest+1); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, "migrate", "down", "1", "--database", url)
	if code != ExitConflict || !strings.Contains(errs, "newer") {
		t.Fatalf("migrate down 1 on a newer schema: %d %q %q, want exit %d naming the newer schema", code, out, errs, ExitConflict)
	}
	var n int
	if err := conn.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*) FROM %s.migrations WHERE version = $1`, pgx.Identifier{schema}.Sanitize()), newest).Scan(&n); err != nil || n != 1 {
		t.Fatalf("version %d after a refused migrate down: %d rows, %v", newest, n, err)
	}
}

// TestMigrateDownCreatesNothing: `idem migrate down` on a PostgreSQL
// schema that exists without a migrations table (made by an operator
// before the first `idem migrate`) says it rolled back nothing and
// creates nothing; it created the migrations table. On SQLite (no `migrate
// down`) it is a usage error that neither creates the file nor changes
// one that exists. Not parallel: the schema name travels in
// IDEM_PG_SCHEMA.
func TestMigrateDownCreatesNothing(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, "migrate", "down", "--database", url)
	if code != 0 || out != "rolled back 0 version(s)\n" {
		t.Errorf("migrate down on a schema without tables: %d %q %q, want exit 0 and 0 rolled back", code, out, errs)
	}
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("migrate down on a schema without tables left %d table(s) in it (%v), want none", tables, err)
	}

	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, errs, code := run(t, "migrate", "down", "--database", missing); code != ExitUsage {
		t.Errorf("migrate down on SQLite: exit %d %q, want %d", code, errs, ExitUsage)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("migrate down created the SQLite file %s: %v", missing, err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run(t, "migrate", "down", "--database", empty); code != ExitUsage {
		t.Errorf("migrate down on SQLite: exit %d %q, want %d", code, errs, ExitUsage)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("migrate down changed the empty SQLite file %s: %v", empty, err)
	}
}

// TestMigrateDownRefusesUnknownOlderVersion: `idem migrate down` on a
// schema with a version this binary does not know below its newest (one
// another build applied, in a gap of the numbering) exits 4, as on a
// schema a newer idem migrated, names the version and rolls back nothing.
// It exited 1 with the text of a newer schema. Not parallel: the schema
// name travels in IDEM_PG_SCHEMA.
func TestMigrateDownRefusesUnknownOlderVersion(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	if out, errs, code := run(t, "migrate", "--database", url); code != 0 {
		t.Fatalf("migrate: %d %q %q", code, out, errs)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	table := pgx.Identifier{schema}.Sanitize() + ".migrations"
	// The lowest number below the newest that this binary has no
	// migration of (0 when they run 1, 2, …).
	var unknown, before int
	if err := conn.QueryRow(t.Context(), `SELECT min(v) FROM generate_series(0, (SELECT max(version) FROM `+table+`)) v
		WHERE v NOT IN (SELECT version FROM `+table+`)`).Scan(&unknown); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO `+table+` (version, name) VALUES ($1, 'from_another_build')`, unknown); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&before); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, "migrate", "down", "1", "--database", url)
	if code != ExitConflict || !strings.Contains(errs, fmt.Sprintf("version %d", unknown)) || strings.Contains(errs, "newer than") ||
		!strings.Contains(errs, "hint: ") {
		t.Errorf("migrate down 1 with unknown version %d below the newest: %d %q %q, want exit %d naming it (not a newer schema) with a hint",
			unknown, code, out, errs, ExitConflict)
	}
	var after int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&after); err != nil || after != before {
		t.Errorf("a refused migrate down left %d versions of %d (%v)", after, before, err)
	}
	// Up and status (documented): they leave it and exit 0.
	for _, action := range []string{"up", "status"} {
		if out, errs, code := run(t, "migrate", action, "--database", url); code != 0 ||
			(action == "status" && !strings.Contains(out, "unknown to this binary")) {
			t.Errorf("migrate %s with unknown version %d below the newest: %d %q %q, want exit 0", action, unknown, code, out, errs)
		}
	}
}
