package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// cliServer runs an API server on a fresh SQLite file and returns its
// URL, an admin key and the database path.
func cliServer(t *testing.T) (url, key, db string) {
	t.Helper()
	db = sqlitetest.Path(t)
	st, err := sqlitestore.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(client, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	secret, k := idemhttp.NewAPIKey("default", true, "t", time.Now())
	if err := st.APIKeyCreate(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return hs.URL, secret, db
}

// run runs the CLI and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// cliAPI runs an API server (cliServer) and returns mustRun, which runs the
// CLI with args and api (the server's --url and --api-key), fails the test
// unless it exits 0 and returns its stdout.
func cliAPI(t *testing.T) (mustRun func(args ...string) string, api []string) {
	t.Helper()
	url, key, _ := cliServer(t)
	api = []string{"--url", url, "--api-key", key}
	return func(args ...string) string {
		t.Helper()
		out, errs, code := run(t, append(args, api...)...)
		if code != 0 {
			t.Fatalf("idem %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}, api
}

func TestClientCommands(t *testing.T) {
	t.Parallel()
	mustRun, api := cliAPI(t)
	out := mustRun("enqueue", "email", "--args", `{"to":"a@x"}`, "--key", "k1", "--queue", "mail")
	if !strings.Contains(out, "created") || !strings.Contains(out, "state=available") {
		t.Fatalf("enqueue: %s", out)
	}
	out = mustRun("enqueue", "email", "--args", `{"to":"a@x"}`, "--key", "k1", "--queue", "mail", "--json")
	var res struct {
		Job      struct{ ID string }
		Existing bool
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Existing {
		t.Fatalf("enqueue --json: %s %v", out, err)
	}
	id := res.Job.ID
	if out = mustRun("jobs", "list"); !strings.Contains(out, "email") || !strings.Contains(out, "STATE") {
		t.Fatalf("jobs list: %s", out)
	}
	if out = mustRun("jobs", "get", id); !strings.Contains(out, `{"to":"a@x"}`) {
		t.Fatalf("jobs get: %s", out)
	}
	if out = mustRun("jobs", "cancel", id, "--json"); !strings.Contains(out, `"state": "cancelled"`) {
		t.Fatalf("jobs cancel: %s", out)
	}
	if out = mustRun("jobs", "retry", id); !strings.Contains(out, "available") {
		t.Fatalf("jobs retry: %s", out)
	}
	if out = mustRun("jobs", "attempts", id); !strings.Contains(out, "ATTEMPT") {
		t.Fatalf("jobs attempts: %s", out)
	}
	if out = mustRun("dlq", "list"); !strings.Contains(out, "ID") {
		t.Fatalf("dlq list: %s", out)
	}
	if out = mustRun("dlq", "requeue", "--all"); !strings.Contains(out, "requeued 0") {
		t.Fatalf("dlq requeue: %s", out)
	}
	if out = mustRun("stats"); !strings.Contains(out, "mail") || !strings.Contains(out, "idempotency:") {
		t.Fatalf("stats: %s", out)
	}
	_, errs, code := run(t, append([]string{"jobs", "get", "999999"}, api...)...)
	if code == 0 || !strings.Contains(errs, "404") {
		t.Fatalf("missing job: exit %d %s", code, errs)
	}
	_, errs, code = run(t, append([]string{"dlq", "delete", id}, api...)...)
	if code == 0 || !strings.Contains(errs, "404") {
		t.Fatalf("dlq delete of a live job: exit %d %s", code, errs)
	}
	_, errs, code = run(t, "jobs", "list", "--url", api[1], "--api-key", "idem_wrong") // api: --url URL --api-key KEY
	if code == 0 || !strings.Contains(errs, "401") {
		t.Fatalf("wrong key: exit %d %s", code, errs)
	}
}

func TestAPIKeyCommands(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "keys.db")
	out, errs, code := run(t, "apikey", "create", "--create", "--tenant", "acme", "--name", "ci", "--database", db)
	if code != 0 || !strings.Contains(out, "key:    idem_") {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	var id string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "id:"); ok {
			id = strings.TrimSpace(v)
		}
	}
	out, _, _ = run(t, "apikey", "list", "--database", db)
	if !strings.Contains(out, id) || !strings.Contains(out, "acme") || strings.Contains(out, "idem_") {
		t.Fatalf("list: %s", out)
	}
	if _, errs, code := run(t, "apikey", "revoke", id, "--database", db); code != 0 {
		t.Fatalf("revoke: %s", errs)
	}
	if _, _, code := run(t, "apikey", "revoke", "nope", "--database", db); code == 0 {
		t.Fatal("revoking an unknown key succeeded")
	}
}

func TestGroupFirstStopInterruptsAll(t *testing.T) {
	t.Parallel()
	var g group
	var order []string
	stopA := make(chan struct{})
	g.add(func() error { <-stopA; return nil }, func(error) { order = append(order, "a"); close(stopA) })
	g.add(func() error { return context.Canceled }, func(error) { order = append(order, "b") })
	if err := g.run(); err != context.Canceled {
		t.Fatalf("run: %v", err)
	}
	if strings.Join(order, ",") != "a,b" {
		t.Fatalf("interrupt order %v", order)
	}
}

// TestGroupReportsAShutdownFailure: after a signal (a clean stop, nil)
// an actor that fails while it stops (the runtime that could not release
// its jobs' leases, the cache counters not flushed) makes run fail too:
// idem serve then logs it and exits non-zero instead of reporting a clean
// stop.
func TestGroupReportsAShutdownFailure(t *testing.T) {
	t.Parallel()
	var g group
	stopSig, stopRT := make(chan struct{}), make(chan struct{})
	failed := errors.New("release leases: store down")
	g.add(func() error { <-stopSig; return nil }, func(error) {})
	g.add(func() error { <-stopRT; return failed }, func(error) { close(stopRT) })
	close(stopSig) // the signal
	if err := g.run(); !errors.Is(err, failed) {
		t.Fatalf("run: %v, want the shutdown failure %v", err, failed)
	}
}
