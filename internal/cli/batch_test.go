package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBatchAndResolveCommands(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	file := filepath.Join(t.TempDir(), "jobs.json")
	if err := os.WriteFile(file, []byte(`[{"kind":"upload","args":{"f":"a"}},{"kind":"upload","args":{"f":"b"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, append([]string{"batch", "create", "--key", "up-1", "--file", file}, api...)...)
	if code != 0 || !strings.Contains(out, "batch 1 created") || !strings.Contains(out, "available  2") {
		t.Fatalf("create: %d %q %q", code, out, errs)
	}
	out, _, code = run(t, append([]string{"batch", "create", "--key", "up-1", "--file", file}, api...)...)
	if code != 0 || !strings.Contains(out, "already created") {
		t.Fatalf("repeat: %d %q", code, out)
	}
	out, _, code = run(t, append([]string{"batch", "cancel", "1"}, api...)...)
	if code != 0 || !strings.Contains(out, "cancelled  2") {
		t.Fatalf("cancel: %d %q", code, out)
	}
	if _, _, code = run(t, append([]string{"batch", "get", "99"}, api...)...); code == 0 {
		t.Fatal("an unknown batch exited 0")
	}
	if _, _, code = run(t, append([]string{"dlq", "resolve", "1", "--note", "x"}, api...)...); code == 0 {
		t.Fatal("resolving a cancelled job exited 0")
	}
}

func TestBatchCreateOnFinish(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	file := filepath.Join(t.TempDir(), "jobs.json")
	jobs := `[{"kind":"upload","args":{"f":"a"},"retry":{"max_attempts":3,"base":"60s"}},{"kind":"upload","args":{"f":"b"}}]`
	if err := os.WriteFile(file, []byte(jobs), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, append([]string{"batch", "create", "--key", "up-2", "--file", file,
		"--on-finish", `{"kind":"report","queue":"reports"}`}, api...)...)
	if code != 0 || !strings.Contains(out, "on finish: job 3 (report) pending") {
		t.Fatalf("create: %d %q %q", code, out, errs)
	}
	out, _, code = run(t, append([]string{"batch", "cancel", "1"}, api...)...)
	if code != 0 || !strings.Contains(out, "on finish: job 3 (report) available") {
		t.Fatalf("cancel: %d %q", code, out)
	}
	if _, _, code = run(t, append([]string{"batch", "create", "--key", "up-3", "--file", file,
		"--on-finish", `{"kind":"report","idempotency_key":"x"}`}, api...)...); code == 0 {
		t.Fatal("a completion job with a key exited 0")
	}
	if _, _, code = run(t, append([]string{"batch", "create", "--key", "up-3", "--file", file,
		"--on-finish", `{"kind":`}, api...)...); code == 0 {
		t.Fatal("malformed --on-finish exited 0")
	}
}
