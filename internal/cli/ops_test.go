package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestNoCommandCreatesADatabase: apikey and migrate in a folder without a
// database exit 3 with a hint and leave no file behind.
func TestNoCommandCreatesADatabase(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "idem.db")
	for _, args := range [][]string{
		{"apikey", "list", "--database", db},
		{"apikey", "create", "--database", db},
		{"apikey", "revoke", "x", "--database", db},
		{"migrate", "--database", db},
	} {
		_, errs, code := run(t, args...)
		if code != ExitNotFound || !strings.Contains(errs, "no database at") || !strings.Contains(errs, "hint: ") || !strings.Contains(errs, "--create") {
			t.Fatalf("%v: exit %d %q", args, code, errs)
		}
		if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v created %s", args, db)
		}
	}
	if _, errs, code := run(t, "apikey", "list", "--create", "--database", db); code != 0 {
		t.Fatalf("--create: %d %s", code, errs)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("--create made no file: %v", err)
	}
}

// TestMigrateSaysWhatItApplied: a fresh file gets every migration listed,
// a second run applies nothing, and --json reports the same.
func TestMigrateSaysWhatItApplied(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	out, errs, code := run(t, "migrate", "--create", "--json", "--database", db)
	if code != 0 {
		t.Fatalf("migrate: %d %s", code, errs)
	}
	var res migrateResult
	// Every embedded version, in order, up to To (versions may skip numbers).
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.From != 0 || len(res.Applied) < 5 ||
		res.Applied[len(res.Applied)-1] != res.To || !slices.IsSorted(res.Applied) {
		t.Fatalf("migrate --json %q: %+v %v", out, res, err)
	}
	out, _, code = run(t, "migrate", "--database", db)
	if code != 0 || !strings.Contains(out, "up to date") || !strings.Contains(out, "nothing applied") {
		t.Fatalf("second migrate: %d %q", code, out)
	}
}

// TestExitCodes: usage 2, not found 3, conflict 4, one "idem:" prefix and
// JSON errors with --json.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	if _, errs, code := run(t, "jobs", "list", "--no-such-flag"); code != ExitUsage || !strings.Contains(errs, "hint: see `idem") {
		t.Fatalf("unknown flag: %d %q", code, errs)
	}
	if _, _, code := run(t, "jobs", "get"); code != ExitUsage {
		t.Fatalf("missing argument: %d", code)
	}
	if _, _, code := run(t, "nonsense"); code != ExitUsage {
		t.Fatalf("unknown command: %d", code)
	}
	_, errs, code := run(t, append([]string{"jobs", "get", "999999"}, api...)...)
	if code != ExitNotFound || strings.Count(errs, "idem:") != 1 || !strings.HasPrefix(errs, "idem: 404") {
		t.Fatalf("not found: %d %q", code, errs)
	}
	out, _, code := run(t, append([]string{"enqueue", "k", "--json"}, api...)...)
	if code != 0 {
		t.Fatalf("enqueue: %d", code)
	}
	var enq struct {
		Job struct{ ID string } `json:"job"`
	}
	if err := json.Unmarshal([]byte(out), &enq); err != nil || enq.Job.ID == "" {
		t.Fatalf("enqueue --json %q: %v", out, err)
	}
	if _, errs, code := run(t, append([]string{"jobs", "retry", enq.Job.ID}, api...)...); code != ExitConflict {
		t.Fatalf("retry of an available job: %d %q", code, errs)
	}
	_, errs, code = run(t, append([]string{"jobs", "get", "999999", "--json"}, api...)...)
	if code != ExitNotFound {
		t.Fatalf("get of a job that does not exist: exit %d %q", code, errs)
	}
	var je struct {
		Error struct {
			Message  string `json:"message"`
			ExitCode int    `json:"exit_code"`
			Hint     string `json:"hint"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(errs), &je); err != nil || je.Error.ExitCode != ExitNotFound || je.Error.Hint == "" ||
		strings.Contains(je.Error.Message, "idem:") {
		t.Fatalf("--json error %q: %+v %v", errs, je, err)
	}
	if _, errs, code := run(t, "jobs", "list", "--url", "http://127.0.0.1:1", "--api-key", "k"); code != ExitError || !strings.Contains(errs, "hint: is `idem serve` running") {
		t.Fatalf("no server: %d %q", code, errs)
	}
}

// TestDLQRequeueHonoursLimit: --limit caps a requeue by filter, --dry-run
// changes nothing, and --cursor continues where the last one stopped.
func TestDLQRequeueHonoursLimit(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	makeDead(t, url, key, "flaky", 12)
	countDead := func() int {
		out, _, code := run(t, append([]string{"dlq", "list", "--json", "--limit", "500"}, api...)...)
		if code != 0 {
			t.Fatalf("dlq list: %d", code)
		}
		var page struct{ Jobs []any }
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatal(err)
		}
		return len(page.Jobs)
	}
	out, errs, code := run(t, append([]string{"dlq", "requeue", "--kind", "flaky", "--limit", "5", "--dry-run", "--json"}, api...)...)
	var res struct {
		Requeued   int      `json:"requeued"`
		IDs        []string `json:"ids"`
		NextCursor string   `json:"next_cursor"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.IDs) != 5 || res.Requeued != 0 || res.NextCursor == "" {
		t.Fatalf("dry run: %d %q %q", code, out, errs)
	}
	if n := countDead(); n != 12 {
		t.Fatalf("dry run changed the DLQ: %d dead", n)
	}
	out, errs, code = run(t, append([]string{"dlq", "requeue", "--kind", "flaky", "--limit", "5"}, api...)...)
	if code != 0 || !strings.Contains(out, "requeued 5 jobs") || !strings.Contains(out, "--cursor") {
		t.Fatalf("requeue: %d %q %q", code, out, errs)
	}
	if n := countDead(); n != 7 {
		t.Fatalf("after --limit 5: %d dead, want 7", n)
	}
	out, _, code = run(t, append([]string{"dlq", "requeue", "--kind", "flaky", "--limit", "100", "--json", "--cursor", res.NextCursor}, api...)...)
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Requeued != 7 {
		t.Fatalf("requeue from cursor: %q", out)
	}
	if _, _, code := run(t, append([]string{"dlq", "requeue", "--limit", "0", "--all"}, api...)...); code != ExitUsage {
		t.Fatalf("--limit 0: %d", code)
	}
}

// TestServeBusyPortMintsNoKey: serve on a taken port fails before it
// creates the database (or the first admin key in it).
func TestServeBusyPortMintsNoKey(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "busy.db")
	out, errs, code := run(t, "serve", "--database", db, "--listen", ln.Addr().String())
	if code == 0 || strings.Contains(out, "IDEM_API_KEY") || !strings.Contains(errs, "listen") || !strings.Contains(errs, "hint:") {
		t.Fatalf("serve on a busy port: %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("serve on a busy port left a database: %v", err)
	}
	st, err := sqlitestore.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if keys, err := st.APIKeyList(context.Background()); err != nil || len(keys) != 0 {
		t.Fatalf("keys after a failed start: %d %v", len(keys), err)
	}
}

// TestVersionAndJSONEverywhere: version, --version, and --json on key and
// apikey list.
func TestVersionAndJSONEverywhere(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "idem ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: %d %q", code, out)
	}
	if out2, _, code := run(t, "--version"); code != 0 || out2 != out {
		t.Fatalf("--version %q vs %q", out2, out)
	}
	out, _, _ = run(t, "version", "--json")
	var bi buildInfo
	if err := json.Unmarshal([]byte(out), &bi); err != nil || bi.Module != "github.com/idem-dev/idem" || bi.Version == "" {
		t.Fatalf("version --json %q: %v", out, err)
	}
	out, _, code = runCLI(t, `{"b":1,"a":2}`, "key", "--prefix", "p", "--json")
	var kr keyResult
	if err := json.Unmarshal([]byte(out), &kr); code != 0 || err != nil || kr.Canonical != `{"a":2,"b":1}` || !strings.HasPrefix(kr.Prefixed, "p_") {
		t.Fatalf("key --json: %d %q", code, out)
	}
	db := filepath.Join(t.TempDir(), "k.db")
	if _, _, code := run(t, "apikey", "create", "--create", "--database", db, "--tenant", "t1"); code != 0 {
		t.Fatal("apikey create")
	}
	out, _, _ = run(t, "apikey", "list", "--json", "--database", db)
	var kl struct{ Keys []apiKeyJSON }
	if err := json.Unmarshal([]byte(out), &kl); err != nil || len(kl.Keys) != 1 || kl.Keys[0].Tenant != "t1" || kl.Keys[0].Key != "" {
		t.Fatalf("apikey list --json %q: %v", out, err)
	}
}

// makeDead makes n dead jobs of kind through the HTTP API.
func makeDead(t *testing.T, url, key, kind string, n int) {
	t.Helper()
	ctx := context.Background()
	cl, err := idemclient.New(url, &idemclient.Config{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: kind, Queue: "dq", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"dq"}, WorkerID: "w"})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %d %v", len(jobs), err)
		}
		if _, err := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompletion: --state completes the job states, --queue the queues the
// server has.
func TestCompletion(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	if _, _, code := run(t, "enqueue", "k", "--queue", "mailers", "--url", url, "--api-key", key); code != 0 {
		t.Fatal("enqueue")
	}
	out, _, code := run(t, "__complete", "jobs", "list", "--state", "")
	if code != 0 || !strings.Contains(out, "dead\n") || !strings.Contains(out, "available\n") {
		t.Fatalf("state completion: %q", out)
	}
	out, _, _ = run(t, "__complete", "dlq", "requeue", "--url", url, "--api-key", key, "--queue", "")
	if !strings.Contains(out, "mailers\n") {
		t.Fatalf("queue completion: %q", out)
	}
}

// TestBenchJSON: bench and bench-http print one JSON document with --json.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	out, errs, code := run(t, "bench", "--json", "--jobs", "20", "--singles", "10", "--dups", "5", "--workers", "2", "--goroutines", "2")
	var rep struct {
		Store   string `json:"store"`
		Results []struct {
			What string `json:"what"`
			Jobs int    `json:"jobs"`
		} `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Store != "sqlite" || len(rep.Results) != 4 {
		t.Fatalf("bench --json: %d %q %q", code, out, errs)
	}
	out, errs, code = run(t, "bench-http", "--json", "--requests", "20", "--concurrency", "2", "--keys", "3")
	var hrep struct {
		Results []map[string]any `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &hrep) != nil || len(hrep.Results) != 2 {
		t.Fatalf("bench-http --json: %d %q %q", code, out, errs)
	}
}

// TestFileURIDatabase: a database given as a file: URI (docs/operations.md)
// is the file it names; one with SQLite URI parameters is a usage error
// naming the query. Before, every file: URI failed with SQLite's "unable
// to open database file", or "no database" for a file that existed.
func TestFileURIDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "uri.db")
	if _, errs, code := run(t, "migrate", "--create", "--database", "file:"+path); code != ExitOK {
		t.Fatalf("migrate --create of a file: URI: exit %d %q", code, errs)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at %s: %v", path, err)
	}
	if _, errs, code := run(t, "migrate", "--database", "file://"+path); code != ExitOK {
		t.Fatalf("migrate of an existing file:// URI: exit %d %q", code, errs)
	}
	if _, errs, code := run(t, "migrate", "--database", "file:"+path+"?mode=ro"); code != ExitUsage || !strings.Contains(errs, "query") {
		t.Fatalf("a file: URI with a query: exit %d %q; want a usage error naming the query", code, errs)
	}
}
