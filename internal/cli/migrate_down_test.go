package cli

import (
	"encoding/json"
	"fmt"
	"testing"

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
