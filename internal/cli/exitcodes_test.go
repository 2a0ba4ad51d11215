package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// cliEnv is a real API server and the CLI's flags to reach it.
type cliEnv struct {
	t   *testing.T
	url string
	key string
	db  string
}

func newCLIEnv(t *testing.T) *cliEnv {
	url, key, db := cliServer(t)
	return &cliEnv{t: t, url: url, key: key, db: db}
}

// run runs the CLI against the server with the admin key.
func (e *cliEnv) run(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	return run(e.t, append(args, "--url", e.url, "--api-key", e.key)...)
}

// ok runs the CLI and fails the test unless it exits 0 with want in stdout.
func (e *cliEnv) ok(want string, args ...string) string {
	e.t.Helper()
	out, errs, code := e.run(args...)
	if code != ExitOK || !strings.Contains(out, want) {
		e.t.Fatalf("idem %s: exit %d\nstdout: %s\nstderr: %s\nwant %q in stdout", strings.Join(args, " "), code, out, errs, want)
	}
	return out
}

// jsonOut runs the CLI with --json and decodes stdout into v.
func (e *cliEnv) jsonOut(v any, args ...string) {
	e.t.Helper()
	out := e.ok("", append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("idem %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// enqueue enqueues a job and returns its id.
func (e *cliEnv) enqueue(args ...string) string {
	e.t.Helper()
	var res struct{ Job struct{ ID string } }
	e.jsonOut(&res, append([]string{"enqueue"}, args...)...)
	return res.Job.ID
}

// tenantKey creates a key of tenant (not admin) in the server's store.
func (e *cliEnv) tenantKey(tenant string) string {
	e.t.Helper()
	st, err := sqlitestore.Open(context.Background(), e.db, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	secret, k := idemhttp.NewAPIKey(tenant, false, "cli-test", time.Now())
	if err := st.APIKeyCreate(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// TestBadFlagValuesAreUsageErrors: a malformed flag value is exit code 2
// (usage) with a message naming the flag and the help hint, and nothing
// is sent; a filter value that cannot be understood is never ignored.
func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	id := e.enqueue("k")
	e.ok("", "jobs", "cancel", id)
	jobsFile := filepath.Join(t.TempDir(), "jobs.json")
	if err := os.WriteFile(jobsFile, []byte(`[{"kind":"row"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"enqueue", "k", "--args", "{not json"}, "--args"},
		{[]string{"enqueue", "k", "--metadata", "[1"}, "--metadata"},
		{[]string{"enqueue", "k", "--run-at", "tomorrow"}, "--run-at"},
		{[]string{"enqueue", "k", "--dedup-window", "a week"}, "--dedup-window"},
		{[]string{"enqueue", "k", "--result-ttl", "7 days"}, "--result-ttl"}, // "7" is 7 seconds, as in the API
		{[]string{"enqueue", "k", "--priority", "high"}, "--priority"},
		{[]string{"jobs", "retry", id, "--run-at", "2026-13-01"}, "--run-at"},
		{[]string{"jobs", "list", "--limit", "many"}, "--limit"},
		// 0 or less was once taken for "no flag": 50 jobs, and the
		// server's default number of attempts.
		{[]string{"jobs", "list", "--limit", "0"}, "--limit"},
		{[]string{"dlq", "list", "--limit", "-1"}, "--limit"},
		{[]string{"enqueue", "k", "--max-attempts", "0"}, "--max-attempts"},
		{[]string{"enqueue", "k", "--timeout", "soon"}, "--timeout"},
		{[]string{"jobs", "list", "--bogus"}, "--bogus"},
		{[]string{"dlq", "list", "--resolved", "maybe"}, "--resolved"},
		{[]string{"dlq", "requeue"}, "--all"},
		{[]string{"dlq", "requeue", "--all", "--limit", "0"}, "--limit"},
		{[]string{"schedules", "put", "s", "--cron", "0 * * * *", "--kind", "k", "--args", "{"}, "--args"},
		{[]string{"schedules", "put", "s", "--cron", "0 * * * *", "--kind", "k", "--retry", "{"}, "--retry"},
		{[]string{"schedules", "put", "s", "--cron", "0 * * * *", "--kind", "k", "--retry", `{"delay":["1s"]}`}, "--retry"},
		{[]string{"schedules", "put", "s", "--cron", "0 * * * *", "--kind", "k", "--retry", `{} {}`}, "--retry"},
		{[]string{"enqueue", "k", "--retry", "[1]"}, "--retry"},
		{[]string{"enqueue", "k", "--retry", `{"base":"soon"}`}, "--retry"},
		{[]string{"enqueue", "k", "--retry", `{"bogus":1}`}, "--retry"},
		// Text after the object was once read as more fields of the job.
		{[]string{"enqueue", "k", "--retry", `{"max_attempts":2}, "kind":"other"`}, "--retry"},
		{[]string{"enqueue", "k", "--retry", "null"}, "--retry"},
		{[]string{"topics", "replay", "orders", "--metadata", "region"}, "--metadata"},
		{[]string{"batch", "create", "--key", "b1"}, "--file"},
		{[]string{"batch", "create", "--key", "b1", "--file", jobsFile, "--metadata", "{"}, "--metadata"},
		{[]string{"batch", "create", "--key", "b1", "--file", jobsFile, "--on-finish", "{"}, "--on-finish"},
		{[]string{"batch", "create", "--key", "b1", "--file", jobsFile, "--on-finish", `{"kind":"k","retry":{"base":"soon"}}`}, "--on-finish"},
		{[]string{"topics", "publish", "orders", "--payload", "{"}, "--payload"},
		{[]string{"topics", "publish", "orders", "--metadata", "[1"}, "--metadata"},
		{[]string{"limits", "set", "--concurrency", "1"}, "--for-queue"},
		{[]string{"limits", "set", "--for-queue", "mail"}, "--concurrency"},
		{[]string{"limits", "delete"}, "--for-tenant"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errs, code := e.run(tc.args...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d (usage)\nstdout: %s\nstderr: %s", code, ExitUsage, out, errs)
			}
			if !strings.Contains(errs, tc.flag) || !strings.HasPrefix(errs, "idem: ") {
				t.Errorf("stderr %q does not name %s", errs, tc.flag)
			}
			if !strings.Contains(errs, "hint: see `idem <command> --help`") {
				t.Errorf("stderr %q has no help hint", errs)
			}
		})
	}
	// A malformed server URL, for every client command.
	for _, args := range [][]string{
		{"jobs", "list", "--url", "127.0.0.1:8080"},
		{"enqueue", "k", "--url", "ftp://127.0.0.1"},
		{"batch", "create", "--key", "b1", "--file", jobsFile, "--url", "http://"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errs, code := run(t, args...)
			if code != ExitUsage || !strings.Contains(errs, "--url") {
				t.Errorf("exit %d, want %d (usage) naming --url\nstdout: %s\nstderr: %s", code, ExitUsage, out, errs)
			}
		})
	}
	// Nothing above created a job.
	var page struct{ Jobs []any }
	e.jsonOut(&page, "jobs", "list")
	if len(page.Jobs) != 1 {
		t.Errorf("%d jobs after refused commands, want the first one only", len(page.Jobs))
	}
}

// TestExitCodesPerFailure: each class of failure has its documented exit
// code and an actionable hint (ops_test.go's TestExitCodes covers the
// prefix, unknown commands and --json not-found errors).
func TestExitCodesPerFailure(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	id := e.enqueue("k", "--key", "once", "--args", `{"a":1}`)
	e.ok("", "jobs", "cancel", id)
	tenant := e.tenantKey("acme")

	for _, tc := range []struct {
		name string
		args []string
		code int
		hint string
	}{
		{"missing job", []string{"jobs", "get", "424242"}, ExitNotFound, "idem jobs list"},
		{"missing dead job", []string{"dlq", "delete", id}, ExitNotFound, "idem jobs list"},
		{"cancel twice", []string{"jobs", "cancel", id}, ExitConflict, "idem jobs get ID"},
		{"key reused", []string{"enqueue", "k", "--key", "once", "--args", `{"a":2}`}, ExitConflict,
			"the key belongs to job " + id + ", made from other fields (`idem jobs get " + id + "`)"},
		{"refused by the server", []string{"enqueue", "k", "--max-attempts", "-1"}, ExitUsage, "--help"},
		{"invalid name", []string{"enqueue", "k", "--queue", "bad queue!"}, ExitUsage, "--help"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := e.run(tc.args...)
			if code != tc.code || !strings.Contains(errs, "hint: ") || !strings.Contains(errs, tc.hint) {
				t.Errorf("exit %d, want %d; stderr %q, want a hint with %q", code, tc.code, errs, tc.hint)
			}
			if strings.Contains(errs, "idem: idem:") {
				t.Errorf("prefix printed twice: %q", errs)
			}
		})
	}

	t.Run("wrong key", func(t *testing.T) {
		_, errs, code := run(t, "jobs", "list", "--url", e.url, "--api-key", "idem_nope")
		if code != ExitError || !strings.Contains(errs, "401") || !strings.Contains(errs, "--api-key") {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
	t.Run("tenant key on an admin command", func(t *testing.T) {
		_, errs, code := run(t, "limits", "set", "--for-queue", "mail", "--concurrency", "1", "--url", e.url, "--api-key", tenant)
		if code != ExitError || !strings.Contains(errs, "403") || !strings.Contains(errs, "admin key") {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
	t.Run("tenant key sees its own tenant only", func(t *testing.T) {
		_, errs, code := run(t, "jobs", "get", id, "--url", e.url, "--api-key", tenant)
		if code != ExitNotFound {
			t.Errorf("another tenant's job: exit %d stderr %q", code, errs)
		}
	})
	t.Run("json usage errors", func(t *testing.T) {
		_, errs, code := e.run("enqueue", "k", "--run-at", "later", "--json")
		if code != ExitUsage || !strings.Contains(errs, `"exit_code":2`) {
			t.Errorf("exit %d stderr %q", code, errs)
		}
	})
}

func TestJobsListFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	var ids []string
	for i := range 3 {
		ids = append(ids, e.enqueue("mail", "--queue", "q", "--partition-key", "acct", "--args", `{"i":`+string(rune('0'+i))+`}`))
	}
	e.enqueue("sms", "--queue", "other", "--key", "sms-1")
	e.ok("", "jobs", "cancel", ids[0])

	out := e.ok("next page: --cursor ", "jobs", "list", "--kind", "mail", "--limit", "2")
	if !strings.Contains(out, ids[2]) || !strings.Contains(out, ids[1]) || strings.Contains(out, "sms") {
		t.Fatalf("first page: %s", out)
	}
	cursor := out[strings.Index(out, "--cursor ")+len("--cursor "):]
	cursor = strings.TrimSpace(cursor)
	out = e.ok("", "jobs", "list", "--kind", "mail", "--limit", "2", "--cursor", cursor)
	if !strings.Contains(out, "cancelled") || strings.Contains(out, "next page") {
		t.Fatalf("last page: %s", out)
	}
	for _, tc := range []struct {
		args []string
		n    int
	}{
		{[]string{"--state", "cancelled"}, 1},
		{[]string{"--state", "available,cancelled"}, 4},
		{[]string{"--queue", "other"}, 1},
		{[]string{"--partition-key", "acct"}, 3},
		{[]string{"--key", "sms-1"}, 1},
	} {
		var page struct{ Jobs []struct{ ID string } }
		e.jsonOut(&page, append([]string{"jobs", "list"}, tc.args...)...)
		if len(page.Jobs) != tc.n {
			t.Errorf("jobs list %v: %d jobs, want %d", tc.args, len(page.Jobs), tc.n)
		}
	}
	_, errs, code := e.run("jobs", "list", "--state", "finished")
	if code != ExitUsage || !strings.Contains(errs, "state") {
		t.Errorf("unknown state: exit %d %q", code, errs)
	}
	// One job in detail.
	out = e.ok("partition key:", "jobs", "get", ids[1])
	for _, want := range []string{"id:", ids[1], "queue:", "q", "kind:", "mail", `{"i":1}`, "acct", "attempt:", "0/"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs get lacks %q:\n%s", want, out)
		}
	}
}

func TestJobsRetryAt(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	id := e.enqueue("k")
	e.ok("", "jobs", "cancel", id)
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	var job struct {
		State string
		RunAt time.Time `json:"run_at"`
	}
	e.jsonOut(&job, "jobs", "retry", id, "--run-at", at.Format(time.RFC3339))
	if job.State != "scheduled" || !job.RunAt.Equal(at) {
		t.Fatalf("retry at %v: %+v", at, job)
	}
	_, _, code := e.run("jobs", "retry", id)
	if code != ExitConflict {
		t.Fatalf("retry of a scheduled job: exit %d, want %d", code, ExitConflict)
	}
}

// TestDLQCommands: requeue by filter pages through the dead jobs up to
// --limit and says how to continue; --dry-run changes nothing; resolve and
// delete.
func TestDLQCommands(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	var dead []string
	for range 3 {
		id := e.enqueue("k", "--queue", "pull", "--max-attempts", "1")
		dead = append(dead, id)
	}
	e.killAll("pull", 3)

	out := e.ok("would requeue 2 jobs (dry run)", "dlq", "requeue", "--queue", "pull", "--limit", "2", "--dry-run")
	if !strings.Contains(out, "more dead jobs match: continue with --cursor") {
		t.Errorf("dry run does not say more match:\n%s", out)
	}
	var page struct{ Jobs []struct{ ID string } }
	e.jsonOut(&page, "dlq", "list")
	if len(page.Jobs) != 3 {
		t.Fatalf("dry run changed the dead-letter queue: %d dead", len(page.Jobs))
	}
	var res struct {
		Requeued   int      `json:"requeued"`
		IDs        []string `json:"ids"`
		NextCursor string   `json:"next_cursor"`
	}
	e.jsonOut(&res, "dlq", "requeue", "--queue", "pull", "--limit", "2")
	if res.Requeued != 2 || len(res.IDs) != 2 || res.NextCursor == "" {
		t.Fatalf("requeue --limit 2: %+v", res)
	}
	e.ok("resolved", "dlq", "resolve", dead[0], "--note", "customer refunded")
	var resolved struct{ Jobs []struct{ ID string } }
	e.jsonOut(&resolved, "dlq", "list", "--resolved", "true")
	if len(resolved.Jobs) != 1 || resolved.Jobs[0].ID != dead[0] {
		t.Fatalf("resolved list %+v, want %s", resolved.Jobs, dead[0])
	}
	e.jsonOut(&page, "dlq", "list", "--resolved", "false")
	if len(page.Jobs) != 0 {
		t.Fatalf("unresolved after requeue and resolve: %+v", page.Jobs)
	}
	e.ok("deleted job "+dead[0], "dlq", "delete", dead[0])
	e.ok("requeued 0 jobs", "dlq", "requeue", "--all")
}

// killAll claims n jobs of queue over the API and fails them for good.
func (e *cliEnv) killAll(queue string, n int) {
	e.t.Helper()
	cl, err := (&apiFlags{url: e.url, apiKey: e.key}).client()
	if err != nil {
		e.t.Fatal(err)
	}
	ctx := context.Background()
	for range n {
		jobs, err := cl.Claim(ctx, claimOne(queue))
		if err != nil || len(jobs) != 1 {
			e.t.Fatalf("claim: %v %v", jobs, err)
		}
		if _, err := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, failForGood()); err != nil {
			e.t.Fatal(err)
		}
	}
}

func TestBatchFromStdin(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	var out, errb strings.Builder
	in := strings.NewReader(`[{"kind":"row","queue":"imp","args":{"n":1}},{"kind":"row","queue":"imp","args":{"n":2}}]`)
	code := Run(context.Background(), []string{"batch", "create", "--key", "imp-1", "--file", "-", "--url", e.url, "--api-key", e.key}, in, &out, &errb)
	if code != ExitOK || !strings.Contains(out.String(), "created") {
		t.Fatalf("batch from stdin: %d %q %q", code, out.String(), errb.String())
	}
	e.ok("available  2", "batch", "get", "1")
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"kind":"row"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := e.run("batch", "create", "--key", "imp-2", "--file", bad); code == ExitOK || !strings.Contains(errs, "JSON array") {
		t.Fatalf("batch from an object: %d %q", code, errs)
	}
	if _, _, code := e.run("batch", "create", "--key", "imp-3", "--file", filepath.Join(t.TempDir(), "missing.json")); code == ExitOK {
		t.Fatal("batch from a missing file exited 0")
	}
}

func TestEnvironmentDefaults(t *testing.T) {
	// Not parallel: it sets the environment of the process.
	e := newCLIEnv(t)
	t.Setenv(envURL, e.url)
	t.Setenv(envAPIKey, e.key)
	t.Setenv(envTenant, "acme")
	out, errs, code := run(t, "enqueue", "k", "--json")
	var res struct{ Job struct{ Tenant string } }
	if code != ExitOK || json.Unmarshal([]byte(out), &res) != nil || res.Job.Tenant != "acme" {
		t.Fatalf("enqueue from the environment: %d %q %q", code, out, errs)
	}
	// A flag wins over the environment.
	out, _, code = run(t, "enqueue", "k", "--tenant", "globex", "--json")
	if code != ExitOK || json.Unmarshal([]byte(out), &res) != nil || res.Job.Tenant != "globex" {
		t.Fatalf("--tenant over %s: %d %q", envTenant, code, out)
	}
}

func TestStatsOutput(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	e.enqueue("k", "--queue", "mail")
	e.enqueue("k", "--queue", "mail", "--key", "x")
	out := e.ok("mail", "stats")
	if !strings.Contains(out, "idempotency:") {
		t.Errorf("stats: %s", out)
	}
	var st struct {
		Queues map[string]struct {
			Counts map[string]int `json:"counts"`
		} `json:"queues"`
	}
	e.jsonOut(&st, "stats")
	if st.Queues["mail"].Counts["available"] != 2 {
		t.Errorf("stats --json: %+v", st)
	}
}

func claimOne(queue string) *idemclient.ClaimRequest {
	return &idemclient.ClaimRequest{Queues: []string{queue}, WorkerID: "cli-test", Lease: time.Minute}
}

func failForGood() *idemclient.FailRequest {
	return &idemclient.FailRequest{Error: "boom", NoRetry: true}
}
