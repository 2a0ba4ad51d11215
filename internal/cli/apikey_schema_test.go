package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestAPIKeyLeavesTheSchemaAlone: `idem apikey` run with a newer binary
// than the nodes (the schema one version behind it) lists and creates keys
// without migrating: a migration there would make every running node of the
// older version unready. A fresh schema is still migrated. Not parallel:
// the schema name travels in IDEM_PG_SCHEMA.
func TestAPIKeyLeavesTheSchemaAlone(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	// version returns the schema's version, the binary's, and the version
	// before the binary's (versions may skip numbers: not expected-1).
	version := func() (applied, expected, previous int) {
		t.Helper()
		st, err := pgstore.Open(context.Background(), url, &pgstore.Config{Schema: schema, SkipMigrate: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		applied, expected, err = st.SchemaVersion(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		status, err := st.MigrationStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(status) < 2 {
			t.Fatalf("%d migrations", len(status))
		}
		return applied, expected, status[len(status)-2].Version
	}
	if _, errs, code := run(t, "apikey", "create", "--database", url, "--tenant", "t1"); code != 0 {
		t.Fatalf("apikey create on a fresh schema: %d %s", code, errs)
	}
	if applied, expected, _ := version(); applied != expected {
		t.Fatalf("a fresh schema is at %d after apikey create, want %d", applied, expected)
	}
	if _, errs, code := run(t, "migrate", "down", "1", "--database", url); code != 0 {
		t.Fatalf("down: %s", errs)
	}
	out, errs, code := run(t, "apikey", "list", "--database", url)
	if code != 0 || !strings.Contains(out, "t1") {
		t.Fatalf("apikey list: %d %q %q", code, out, errs)
	}
	if _, errs, code := run(t, "apikey", "create", "--database", url, "--tenant", "t2"); code != 0 {
		t.Fatalf("apikey create: %d %s", code, errs)
	}
	if applied, expected, previous := version(); applied != previous {
		t.Fatalf("apikey moved the schema from %d to %d (this binary expects %d)", previous, applied, expected)
	}
}
