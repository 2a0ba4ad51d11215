package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
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

// TestBatchFileFields: a batch file's job takes every field of an enqueue
// (run_at, depends_on, dedup_window, result_ttl, timeout) instead of
// dropping the ones the CLI did not know (a job meant for later ran at
// once); a field no job has is a usage error naming it, and nothing is
// created.
func TestBatchFileFields(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	later := write("later.json", `[{"kind":"report","run_at":"2099-01-01T00:00:00Z","dedup_window":"1h","result_ttl":"2h","timeout":"30s"}]`)
	var res struct {
		Batch struct {
			Jobs []struct {
				State string
				RunAt string `json:"run_at"`
			}
		}
	}
	e.jsonOut(&res, "batch", "create", "--key", "later", "--file", later)
	if len(res.Batch.Jobs) != 1 || res.Batch.Jobs[0].State != "scheduled" || !strings.HasPrefix(res.Batch.Jobs[0].RunAt, "2099-01-01") {
		t.Fatalf("a job with run_at: %+v", res.Batch.Jobs)
	}
	// idem enqueue --timeout, the same field for one job.
	id := e.enqueue("k", "--timeout", "45s")
	st, err := sqlitestore.Open(context.Background(), e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, _ := strconv.ParseInt(id, 10, 64)
	if row, err := st.JobGet(context.Background(), &store.JobGetParams{ID: n}); err != nil || row.Timeout != 45*time.Second {
		t.Fatalf("enqueue --timeout 45s: %+v %v", row, err)
	}
	typo := write("typo.json", `[{"kind":"report","max_atempts":3}]`)
	out, errs, code := e.run("batch", "create", "--key", "typo", "--file", typo)
	if code != ExitUsage || !strings.Contains(errs, "max_atempts") {
		t.Fatalf("a misspelt field: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	out, errs, code = e.run("batch", "create", "--key", "typo", "--file", later, "--on-finish", `{"kind":"k","quue":"q"}`)
	if code != ExitUsage || !strings.Contains(errs, "quue") {
		t.Fatalf("a misspelt --on-finish field: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if _, _, code := e.run("batch", "get", "2"); code != ExitNotFound {
		t.Fatalf("a refused batch was created (batch get 2: exit %d)", code)
	}
}
