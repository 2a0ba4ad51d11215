package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestKeyCommand(t *testing.T) {
	t.Parallel()
	payload := `{"user_id":"u-42","file_name":"site-plan.pdf","file_size":482133,"total_pages":12,"project_definitions":[{"name":"North","pages":[1,2,3]},{"name":"South","pages":[4,5]}]}`
	out, errOut, code := runCLI(t, payload, "key", "--prefix", "batch")
	if code != 0 || !strings.Contains(out, "prefixed   batch_e49028d7b9b54a9e2f393d560db932f60f69c679f6604485fddf59967253a3db\n") {
		t.Fatalf("code %d out %q err %q", code, out, errOut)
	}
	out, _, code = runCLI(t, `{"to":"a@example.com","template":"welcome"}`, "key",
		"--tenant", "tenant-abc123", "--user", "user-xyz789", "--action", "send_email")
	if code != 0 || !strings.Contains(out, "scoped     tenant-abc123_user-xyz789_send_email_b1c2daf60412e169\n") {
		t.Fatalf("scoped: %d %q", code, out)
	}
	out, _, code = runCLI(t, `{"sku":"SKU001","rule_id":"r123"}`, "key", "--function", "sync-bigquery",
		"--tenant", "tenant-abc123", "--grain", "hour", "--time", "2026-02-06T14:05:09Z")
	if code != 0 || !strings.Contains(out, "lock       sync-bigquery:tenant-abc123:2026-02-06T14:971121298e66\n") {
		t.Fatalf("lock: %d %q", code, out)
	}
	if _, errOut, code := runCLI(t, `{bad`, "key"); code == 0 || !strings.Contains(errOut, "idem:") {
		t.Fatalf("bad JSON: code %d err %q", code, errOut)
	}
	if _, _, code := runCLI(t, `{}`, "key", "--function", "f", "--tenant", "t", "--grain", "week"); code == 0 {
		t.Fatal("bad grain accepted")
	}
}

func TestMigrateAndBenchOnSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "cli.db")
	if out, errOut, code := runCLI(t, "", "migrate", "--create", "--database", db); code != 0 || !strings.Contains(out, "applied ") || !strings.Contains(out, "schema is now at version") {
		t.Fatalf("migrate: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "", "migrate", "status", "--database", db); code == 0 || !strings.Contains(errOut, "PostgreSQL") {
		t.Fatalf("status on sqlite: %d %q", code, errOut)
	}
	out, errOut, code := runCLI(t, "", "bench", "--database", "sqlite:"+db, "--jobs", "300", "--singles", "100", "--dups", "50", "--workers", "4")
	if code != 0 {
		t.Fatalf("bench: %d %q", code, errOut)
	}
	for _, want := range []string{"enqueue batch of 1000", "enqueue single", "enqueue duplicate key", "work (claim+run+complete)", "wait (run_at→start)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench output lacks %q:\n%s", want, out)
		}
	}
}

// TestKeySetPointerWithComma: --set takes each JSON Pointer whole, as RFC
// 6901 spells it: a member name may hold a comma (or a quote), which a
// comma-separated flag would split into two pointers (one refused).
func TestKeySetPointerWithComma(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, `{"a,b":[2,1],"c\"d":[4,3]}`, "key", "--set", "/a,b", "--set", `/c"d`)
	if code != 0 || !strings.Contains(out, `canonical  {"a,b":[1,2],"c\"d":[3,4]}`+"\n") {
		t.Fatalf("code %d out %q err %q", code, out, errOut)
	}
}

// TestKeyRefusesInputOverLimit: `idem key` reads at most 16 MiB of
// standard input and fails, exit 2, saying so when there is more. It cut
// the input there silently: "1", 16 MiB of spaces and "2" (not one JSON
// document) printed the keys of 1.
func TestKeyRefusesInputOverLimit(t *testing.T) {
	t.Parallel()
	const limit = 16 << 20
	out, errOut, code := runCLI(t, "1"+strings.Repeat(" ", limit)+"2", "key")
	if code != ExitUsage || !strings.Contains(errOut, "standard input is over 16 MiB") || out != "" {
		t.Fatalf("input over 16 MiB: code %d out %.200q err %q, want exit %d saying it is over 16 MiB", code, out, errOut, ExitUsage)
	}
	// 16 MiB exactly is read whole: white space and the number 1.
	if _, errOut, code := runCLI(t, strings.Repeat(" ", limit-1)+"1", "key"); code != 0 {
		t.Fatalf("input of 16 MiB: code %d err %q", code, errOut)
	}
}
