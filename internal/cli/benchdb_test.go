package cli

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestBenchSchemaOnPostgres: bench takes the schema of the URL's
// search_path, drops a schema it created unless --keep, and refuses (exit 2,
// no hang) a schema that already holds jobs.
func TestBenchSchemaOnPostgres(t *testing.T) {
	t.Parallel()
	base, schema := dbtest.NewSchema(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	args := []string{"bench", "--database", u.String(), "--jobs", "50", "--singles", "20", "--dups", "5", "--workers", "4", "--goroutines", "2", "--timeout", "2m"}

	out, errs, code := run(t, args...)
	if code != 0 || !strings.Contains(out, "schema="+schema+" (dropped at the end)") {
		t.Fatalf("bench on the URL's schema: %d %q %q", code, out, errs)
	}
	if exists(t, base, schema) {
		t.Fatalf("schema %s not dropped", schema)
	}
	if out, errs, code = run(t, append(args, "--keep")...); code != 0 || !exists(t, base, schema) {
		t.Fatalf("bench --keep: %d %q %q", code, out, errs)
	}
	out, errs, code = run(t, append(args[:1:1], "--database", base, "--schema", schema, "--jobs", "5", "--workers", "1")...)
	if code != ExitUsage || !strings.Contains(errs, "already holds jobs") {
		t.Fatalf("bench on a used schema: %d %q %q", code, out, errs)
	}
	if !exists(t, base, schema) {
		t.Fatalf("bench dropped a schema it did not create")
	}
}

func exists(t *testing.T, url, schema string) bool {
	t.Helper()
	ok, err := schemaExists(context.Background(), url, schema)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
