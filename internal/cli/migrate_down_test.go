package cli

import (
	"context"
	"encoding/json"
	"fmt"
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
