package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestMigrateOnPostgres: on the real PostgreSQL, migrate status lists
// pending versions, up says what it applied (then nothing), and a node on
// a schema one version behind is unready until `idem migrate` runs.
// Not parallel: the schema name travels in IDEM_PG_SCHEMA.
func TestMigrateOnPostgres(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	var status struct {
		Migrations []migrationJSON `json:"migrations"`
	}
	out, errs, code := run(t, "migrate", "status", "--json", "--database", url)
	if code != 0 || json.Unmarshal([]byte(out), &status) != nil || len(status.Migrations) == 0 || status.Migrations[0].Applied {
		t.Fatalf("status on a fresh schema: %d %q %q", code, out, errs)
	}
	total := len(status.Migrations)
	var res migrateResult
	out, errs, code = run(t, "migrate", "--json", "--database", url)
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.From != 0 || len(res.Applied) != total {
		t.Fatalf("migrate: %d %q %q", code, out, errs)
	}
	if out, _, _ := run(t, "migrate", "--database", url); !strings.Contains(out, "nothing applied") {
		t.Fatalf("second migrate: %q", out)
	}
	if _, errs, code := run(t, "migrate", "down", "1", "--database", url); code != 0 {
		t.Fatalf("down: %s", errs)
	}

	st, err := pgstore.Open(context.Background(), url, &pgstore.Config{Schema: schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(client, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	ready := func() int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	if c := ready(); c != http.StatusServiceUnavailable {
		t.Fatalf("readyz one version behind: %d", c)
	}
	out, _, code = run(t, "migrate", "--json", "--database", url)
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Applied) != 1 || res.To != res.From+1 {
		t.Fatalf("migrate after down: %q", out)
	}
	if c := ready(); c != http.StatusOK {
		t.Fatalf("readyz after migrate: %d", c)
	}
}
