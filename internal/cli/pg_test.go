package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Applied) != 1 || res.Applied[0] != res.To || res.From >= res.To {
		t.Fatalf("migrate after down: %q", out)
	}
	if c := ready(); c != http.StatusOK {
		t.Fatalf("readyz after migrate: %d", c)
	}
}

// TestMigrateStatusAndDown: on the real PostgreSQL, `migrate status` lists
// every version in order, each with the time it was applied or "pending",
// in text and JSON alike; `migrate down N` rolls back exactly N versions.
// Not parallel: the schema name travels in IDEM_PG_SCHEMA.
func TestMigrateStatusAndDown(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	if _, errs, code := run(t, "migrate", "--database", url); code != 0 {
		t.Fatalf("migrate: %s", errs)
	}
	if out, errs, code := run(t, "migrate", "down", "2", "--database", url); code != 0 || out != "rolled back 2 version(s)\n" {
		t.Fatalf("down 2: %d %q %q", code, out, errs)
	}
	textTime := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$`)
	out, errs, code := run(t, "migrate", "status", "--database", url)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) < 4 || strings.Fields(lines[0])[0] != "VERSION" {
		t.Fatalf("status: %d %q %q", code, out, errs)
	}
	rows := lines[1:]
	// The versions, in order; they may skip numbers (a number kept for
	// another branch).
	versions := make([]int, len(rows))
	for i, l := range rows {
		f := strings.Fields(l)
		v := 0
		if len(f) >= 3 {
			v, _ = strconv.Atoi(f[0])
		}
		if v <= 0 || i > 0 && v <= versions[i-1] {
			t.Fatalf("line %d of status: %q, want a version above the previous line's first", i+1, l)
		}
		versions[i] = v
		applied := strings.Join(f[2:], " ")
		wantPending := i >= len(rows)-2
		if wantPending && applied != "pending" || !wantPending && !textTime.MatchString(applied) {
			t.Fatalf("version %d: %q (pending expected: %v)", i+1, applied, wantPending)
		}
	}

	var status struct {
		Migrations []migrationJSON `json:"migrations"`
	}
	out, errs, code = run(t, "migrate", "status", "--json", "--database", url)
	if code != 0 || json.Unmarshal([]byte(out), &status) != nil || len(status.Migrations) != len(rows) {
		t.Fatalf("status --json: %d %q %q", code, out, errs)
	}
	jsonTime := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	for i, m := range status.Migrations {
		name := strings.Fields(rows[i])[1]
		wantApplied := i < len(rows)-2
		if m.Version != versions[i] || m.Name != name || m.Applied != wantApplied || jsonTime.MatchString(m.AppliedAt) != wantApplied {
			t.Fatalf("migration %d in JSON: %+v, want version %d name %q applied %v", i+1, m, versions[i], name, wantApplied)
		}
	}

	var down map[string]int
	out, _, code = run(t, "migrate", "down", "--json", "--database", url)
	if code != 0 || json.Unmarshal([]byte(out), &down) != nil || down["rolled_back"] != 1 {
		t.Fatalf("down --json: %d %q", code, out)
	}
	var res migrateResult
	out, _, code = run(t, "migrate", "--json", "--database", url)
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.To != versions[len(rows)-1] || res.From != versions[len(rows)-4] ||
		!slices.Equal(res.Applied, versions[len(rows)-3:]) {
		t.Fatalf("migrate after three down: %d %q", code, out)
	}
}

// TestMigrateRefusals: actions and counts that make no sense, and status or
// down on SQLite, are usage errors (exit code 2) that say why.
func TestMigrateRefusals(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "idem.db")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "sideways", "--database", db}, `unknown action "sideways"`},
		{[]string{"migrate", "status", "--database", db}, "are for PostgreSQL"},
		{[]string{"migrate", "down", "1", "--database", db}, "are for PostgreSQL"},
		{[]string{"migrate", "down", "0", "--database", "postgres://127.0.0.1:1/none"}, `"0" is not a positive number`},
		{[]string{"migrate", "down", "two", "--database", "postgres://127.0.0.1:1/none"}, `"two" is not a positive number`},
		// Malformed counts are refused whole, not read up to the first
		// non-digit ("2x" as 2) or in another base ("0x10" as 16).
		{[]string{"migrate", "down", "2x", "--database", "postgres://127.0.0.1:1/none"}, `"2x" is not a positive number`},
		{[]string{"migrate", "down", "0x10", "--database", "postgres://127.0.0.1:1/none"}, `"0x10" is not a positive number`},
		{[]string{"migrate", "down", "1.5", "--database", "postgres://127.0.0.1:1/none"}, `"1.5" is not a positive number`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:3], " "), func(t *testing.T) {
			out, errs, code := run(t, c.args...)
			if code != 2 || !strings.Contains(errs, c.want) || out != "" {
				t.Fatalf("%d out %q err %q, want exit 2 with %q", code, out, errs, c.want)
			}
		})
	}
}
