package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestServeOnMissingPostgresDatabase: a postgres:// URL whose database
// does not exist (SQLSTATE 3D000) is "not found" — exit code 3, as for a
// missing SQLite file or schema — with a hint saying to create it, not the
// generic "check that PostgreSQL runs" of an unreachable server, which
// answered here.
func TestServeOnMissingPostgresDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(dbtest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	name := "idem_missing_" + strings.ReplaceAll(strings.ToLower(filepath.Base(t.TempDir())), "-", "_")
	u.Path = "/" + name
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--database", u.String()},
		{"migrate", "--database", u.String()},
	} {
		_, errs, code := run(t, args...)
		if code != ExitNotFound {
			t.Errorf("%s: exit %d, want %d: %s", args[0], code, ExitNotFound, errs)
		}
		for _, want := range []string{`database "` + name + `" does not exist`, "hint: create it", `CREATE DATABASE "` + name + `"`} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", args[0], want, errs)
			}
		}
	}
}

// TestBadPGSchemaVariable: an IDEM_PG_SCHEMA no schema can be named is a
// usage error naming the variable (exit 2), found before connecting; it
// was exit 1 with the hint to check the URL and that PostgreSQL runs.
// Not parallel: t.Setenv.
func TestBadPGSchemaVariable(t *testing.T) {
	t.Setenv(envSchema, "Bad Schema!")
	for _, args := range [][]string{
		{"migrate", "--database", "postgres://postgres@127.0.0.1:1/test"},
		{"serve", "--listen", "127.0.0.1:0", "--database", "postgres://postgres@127.0.0.1:1/test"},
	} {
		_, errs, code := run(t, args...)
		if code != ExitUsage || !strings.Contains(errs, `IDEM_PG_SCHEMA "Bad Schema!"`) || strings.Contains(errs, "PostgreSQL runs") {
			t.Errorf("%s: exit %d, stderr %q: want %d naming IDEM_PG_SCHEMA", args[0], code, errs, ExitUsage)
		}
	}
}

// TestMigrateOnASchemaAhead: `idem migrate` with a binary older than the
// schema (a newer idem migrated it) applies nothing and says so as an
// error — exit 4, the schema in the wrong state for this binary — naming
// both versions, instead of "schema is up to date" and exit 0 while every
// node of this binary stays unready. Not parallel: IDEM_PG_SCHEMA.
func TestMigrateOnASchemaAhead(t *testing.T) {
	url, newest := migratedAheadSchema(t)
	out, errs, code := run(t, "migrate", "--database", url)
	want := fmt.Sprintf("schema is at version %d, newer than this binary's %d", newest+1, newest)
	if code != ExitConflict || !strings.Contains(errs, want) || !strings.Contains(errs, "hint: ") || strings.Contains(out, "up to date") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want %d and %q", code, out, errs, ExitConflict, want)
	}
}

// TestMigrateStatusOnASchemaAhead: `idem migrate status` on a schema a
// newer idem migrated lists the versions this binary does not know —
// applied, with their names as the newer binary recorded them, marked
// "unknown to this binary" (in --json, "unknown": true) — and exits 4 as
// `idem migrate` does there. Before the fix it listed only the versions
// it knew, all applied, and exited 0: the schema looked up to date. Not
// parallel: IDEM_PG_SCHEMA.
func TestMigrateStatusOnASchemaAhead(t *testing.T) {
	url, newest := migratedAheadSchema(t)
	out, errs, code := run(t, "migrate", "status", "--database", url)
	line := fmt.Sprintf("%-8d %-28s", newest+1, "from_a_newer_idem")
	want := fmt.Sprintf("schema is at version %d, newer than this binary's %d", newest+1, newest)
	if code != ExitConflict || !strings.Contains(out, line) || !strings.Contains(out, "unknown to this binary") ||
		!strings.Contains(errs, want) {
		t.Fatalf("status: exit %d, stdout %q, stderr %q: want %d, version %d listed as unknown to this binary and %q",
			code, out, errs, ExitConflict, newest+1, want)
	}
	out, errs, code = run(t, "migrate", "status", "--json", "--database", url)
	var status struct {
		Migrations []struct {
			Version int    `json:"version"`
			Name    string `json:"name"`
			Applied bool   `json:"applied"`
			Unknown bool   `json:"unknown"`
		} `json:"migrations"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil || code != ExitConflict || len(status.Migrations) == 0 {
		t.Fatalf("status --json: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	last := status.Migrations[len(status.Migrations)-1]
	if last.Version != newest+1 || last.Name != "from_a_newer_idem" || !last.Applied || !last.Unknown {
		t.Fatalf("status --json: last migration %+v, want version %d applied and unknown", last, newest+1)
	}
}

// migratedAheadSchema migrates a new schema with this binary (IDEM_PG_SCHEMA names
// it for the rest of t), records one more migration as a newer idem would
// have, 'from_a_newer_idem', and returns the database URL and this
// binary's newest version.
func migratedAheadSchema(t *testing.T) (url string, newest int) {
	t.Helper()
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	if _, errs, code := run(t, "migrate", "--database", url); code != 0 {
		t.Fatalf("migrate: %d %s", code, errs)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table := pgx.Identifier{schema, "migrations"}.Sanitize()
	if err := conn.QueryRow(ctx, "SELECT max(version) FROM "+table).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+" (version, name) VALUES ($1, 'from_a_newer_idem')", newest+1); err != nil {
		t.Fatal(err)
	}
	return url, newest
}
