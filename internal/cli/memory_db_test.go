package cli

import (
	"strings"
	"testing"
)

// TestInMemorySQLiteRefused: --database :memory: (or file::memory:) is a
// usage error naming it. The store opens its writer and its readers as
// separate connections, each with its own empty in-memory database:
// `migrate` reported "applied 30 migration(s) … schema is now at version
// 0", `apikey create` printed a key stored nowhere, and `serve` stopped
// with "no such table: api_keys".
func TestInMemorySQLiteRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"migrate", "--database", ":memory:"},
		{"migrate", "--database", "sqlite::memory:"},
		{"apikey", "create", "--database", ":memory:"},
		{"apikey", "list", "--database", "file::memory:", "--json"},
		{"serve", "--database", ":memory:", "--listen", "127.0.0.1:0"},
	} {
		out, errs, code := run(t, args...)
		if code != ExitUsage || !strings.Contains(errs, ":memory:") || strings.Contains(out, "key:") {
			t.Errorf("idem %s: exit %d, want %d naming :memory:\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, ExitUsage, out, errs)
		}
	}
}
