package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateStatusOnlyReads: `idem migrate status` on a schema that does
// not exist (a new database, a misspelt IDEM_PG_SCHEMA) lists every version
// pending and says the schema does not exist, without creating the schema
// or its migrations table. Not parallel: the schema name travels in
// IDEM_PG_SCHEMA.
func TestMigrateStatusOnlyReads(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	for _, args := range [][]string{{"migrate", "status", "--database", url}, {"migrate", "status", "--json", "--database", url}} {
		out, errs, code := run(t, args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d %q %q", args, code, out, errs)
		}
		if !strings.Contains(errs, "does not exist") {
			t.Errorf("%v: stderr %q does not say the schema does not exist", args, errs)
		}
		if strings.Contains(out, "{") {
			var status struct {
				SchemaExists *bool           `json:"schema_exists"`
				Migrations   []migrationJSON `json:"migrations"`
			}
			if err := json.Unmarshal([]byte(out), &status); err != nil || status.SchemaExists == nil || *status.SchemaExists ||
				len(status.Migrations) == 0 || status.Migrations[0].Applied {
				t.Errorf("status --json on no schema: %q", out)
			}
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("migrate status created the schema %q", schema)
	}
	// Once migrated, status says nothing of a missing schema.
	if _, errs, code := run(t, "migrate", "--database", url); code != ExitOK {
		t.Fatalf("migrate: %s", errs)
	}
	if out, errs, code := run(t, "migrate", "status", "--database", url); code != ExitOK || strings.Contains(errs, "does not exist") || strings.Contains(out, " pending\n") {
		t.Fatalf("status after migrate: %d %q %q", code, out, errs)
	}
}
