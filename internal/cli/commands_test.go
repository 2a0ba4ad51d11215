package cli

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "idem ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: %d %q", code, out)
	}
	flag, _, code := run(t, "--version")
	if code != ExitOK || flag != out {
		t.Fatalf("--version %q differs from version %q", flag, out)
	}
	js, _, code := run(t, "version", "--json")
	var b buildInfo
	if code != ExitOK || json.Unmarshal([]byte(js), &b) != nil || b.Module == "" || b.Version == "" || !strings.HasPrefix(b.GoVersion, "go1.") {
		t.Fatalf("version --json: %d %q", code, js)
	}
	if _, _, code := run(t, "version", "extra"); code != ExitUsage {
		t.Fatalf("version with an argument: exit %d", code)
	}
}

// TestAPIKeysAgainstTheServer: a key made with `idem apikey create` in the
// server's database works against the server at once; its scope holds; a
// revoked key that was never used is refused.
func TestAPIKeysAgainstTheServer(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	var k struct {
		ID     string `json:"id"`
		Tenant string `json:"tenant"`
		Admin  bool   `json:"admin"`
		Key    string `json:"key"`
	}
	out, errs, code := run(t, "apikey", "create", "--tenant", "acme", "--name", "worker", "--json", "--database", e.db)
	if code != ExitOK || json.Unmarshal([]byte(out), &k) != nil || k.Tenant != "acme" || k.Admin || !strings.HasPrefix(k.Key, "idem_") {
		t.Fatalf("create: %d %q %q", code, out, errs)
	}
	out, _, code = run(t, "enqueue", "k", "--json", "--url", e.url, "--api-key", k.Key)
	var res struct{ Job struct{ Tenant string } }
	if code != ExitOK || json.Unmarshal([]byte(out), &res) != nil || res.Job.Tenant != "acme" {
		t.Fatalf("enqueue with the new key: %d %q", code, out)
	}
	// A job's own retry policy (--retry) reaches the server.
	out, _, code = run(t, "enqueue", "k", "--json", "--url", e.url, "--api-key", k.Key, "--retry", `{"max_attempts":3,"delays":["1m","2m","4m"]}`)
	var withRetry struct {
		Job struct {
			MaxAttempts int `json:"max_attempts"`
			Retry       *struct {
				Delays []string `json:"delays"`
			} `json:"retry"`
		} `json:"job"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &withRetry) != nil || withRetry.Job.Retry == nil ||
		strings.Join(withRetry.Job.Retry.Delays, ",") != "1m0s,2m0s,4m0s" || withRetry.Job.MaxAttempts != 3 {
		t.Fatalf("enqueue --retry: %d %q", code, out)
	}
	// A tenant key cannot act for another tenant.
	if out, _, code = run(t, "enqueue", "k", "--json", "--tenant", "globex", "--url", e.url, "--api-key", k.Key); code == ExitOK {
		var other struct{ Job struct{ Tenant string } }
		if json.Unmarshal([]byte(out), &other) == nil && other.Job.Tenant == "globex" {
			t.Fatalf("a tenant key enqueued into globex: %q", out)
		}
	}

	var unused struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	out, _, _ = run(t, "apikey", "create", "--admin", "--json", "--database", e.db)
	if json.Unmarshal([]byte(out), &unused) != nil || unused.ID == "" {
		t.Fatalf("create admin: %q", out)
	}
	if out, _, code := run(t, "apikey", "revoke", unused.ID, "--json", "--database", e.db); code != ExitOK || !strings.Contains(out, unused.ID) {
		t.Fatalf("revoke: %d %q", code, out)
	}
	if _, errs, code := run(t, "stats", "--url", e.url, "--api-key", unused.Key); code == ExitOK || !strings.Contains(errs, "401") {
		t.Fatalf("revoked key: %d %q", code, errs)
	}
	var list struct {
		Keys []struct {
			ID        string     `json:"id"`
			Key       string     `json:"key"`
			RevokedAt *time.Time `json:"revoked_at"`
		} `json:"keys"`
	}
	out, _, _ = run(t, "apikey", "list", "--json", "--database", e.db)
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Keys) < 3 {
		t.Fatalf("list: %q %v", out, err)
	}
	for _, l := range list.Keys {
		if l.Key != "" {
			t.Errorf("list shows the secret of %s", l.ID)
		}
		if (l.ID == unused.ID) != (l.RevokedAt != nil) {
			t.Errorf("key %s revoked_at %v", l.ID, l.RevokedAt)
		}
	}
	// No database file: exit 3 and the hint names --create.
	if _, errs, code := run(t, "apikey", "list", "--database", e.db+".missing"); code != ExitNotFound || !strings.Contains(errs, "--create") {
		t.Fatalf("missing database: %d %q", code, errs)
	}
}

func TestTopicEventsPages(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	for i, typ := range []string{"created", "paid", "shipped"} {
		e.ok("event ", "topics", "publish", "orders", "--type", typ, "--partition-key", "o-"+string(rune('1'+i%2)),
			"--payload", `{"n":`+string(rune('0'+i))+`}`)
	}
	out := e.ok("next page: --cursor ", "topics", "events", "orders", "--limit", "2")
	if !strings.Contains(out, "created") || !strings.Contains(out, "paid") || strings.Contains(out, "shipped") {
		t.Fatalf("page 1:\n%s", out)
	}
	cursor := strings.TrimSpace(out[strings.Index(out, "--cursor ")+len("--cursor "):])
	out = e.ok("shipped", "topics", "events", "orders", "--limit", "2", "--cursor", cursor)
	if strings.Contains(out, "next page") || strings.Contains(out, "created") {
		t.Fatalf("page 2:\n%s", out)
	}
	var page struct {
		Events []struct {
			Type         string          `json:"type"`
			PartitionKey string          `json:"partition_key"`
			Payload      json.RawMessage `json:"payload"`
		} `json:"events"`
		NextCursor string `json:"next_cursor"`
	}
	e.jsonOut(&page, "topics", "events", "orders", "--partition-key", "o-1")
	if len(page.Events) != 2 || page.Events[0].Type != "created" || page.Events[1].Type != "shipped" || page.NextCursor != "" {
		t.Fatalf("by partition: %+v", page)
	}
	e.jsonOut(&page, "topics", "events", "orders", "--type", "paid", "--type", "shipped")
	if len(page.Events) != 2 {
		t.Fatalf("two types: %+v", page)
	}
	if _, errs, code := e.run("topics", "events", "orders", "--cursor", "nope"); code != ExitUsage || !strings.Contains(errs, "cursor") {
		t.Fatalf("bad cursor: %d %q", code, errs)
	}
	e.ok("replayed 0 events", "topics", "replay", "orders", "--from", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

func TestQueuesAndLimitsJSON(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	var p struct {
		Queue  string `json:"queue"`
		Tenant string `json:"tenant"`
		Paused bool   `json:"paused"`
	}
	e.jsonOut(&p, "queues", "pause", "mail", "--for-tenant", "acme")
	if p.Queue != "mail" || p.Tenant != "acme" || !p.Paused {
		t.Fatalf("pause: %+v", p)
	}
	e.ok("tenant acme in queue mail resumed", "queues", "resume", "mail", "--for-tenant", "acme")

	e.ok("", "limits", "set", "--for-tenant", "acme", "--for-queue", "mail", "--concurrency", "3")
	e.ok("", "limits", "set", "--for-queue", "sms", "--rate", "10/1s")
	var list struct {
		Limits []struct {
			Tenant      string `json:"tenant"`
			Queue       string `json:"queue"`
			Rate        string `json:"rate"`
			Concurrency int    `json:"concurrency"`
		} `json:"limits"`
	}
	e.jsonOut(&list, "limits", "list")
	ls := list.Limits
	if len(ls) != 2 {
		t.Fatalf("limits: %+v", ls)
	}
	seen := map[string]bool{}
	for _, l := range ls {
		seen[l.Tenant+"/"+l.Queue+"/"+l.Rate+"/"+string(rune('0'+l.Concurrency))] = true
	}
	if !seen["acme/mail//3"] || !seen["/sms/10/1s/0"] {
		t.Fatalf("limits: %+v", ls)
	}
	out := e.ok("sms", "limits", "list")
	if !strings.Contains(out, "10/1s") || !strings.Contains(out, "acme") {
		t.Fatalf("limits list:\n%s", out)
	}
}

func TestTargetsStatsWithoutDeliveries(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	out := e.ok("TARGET", "targets", "stats")
	if lines := strings.Count(strings.TrimSpace(out), "\n"); lines != 0 {
		t.Fatalf("rows without any delivery:\n%s", out)
	}
	out = e.ok("created target hooks", "targets", "put", "hooks", "--target-url", "http://127.0.0.1:9/h", "--kind", "ping", "--unsigned")
	if strings.Contains(out, "whsec_") {
		t.Fatalf("--unsigned printed a generated secret:\n%s", out)
	}
	if _, errs, code := e.run("targets", "put", "x", "--target-url", "http://127.0.0.1:9/h", "--kind", "ping", "--unsigned",
		"--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); code != ExitUsage || !strings.Contains(errs, "--unsigned") {
		t.Fatalf("--unsigned with --secret: %d %q", code, errs)
	}
	var ts []struct {
		Name        string `json:"name"`
		Kind        string `json:"kind"`
		SecretCount int    `json:"secret_count"`
	}
	e.jsonOut(&ts, "targets", "list")
	if len(ts) != 1 || ts[0].Kind != "ping" || ts[0].SecretCount != 0 {
		t.Fatalf("unsigned target: %+v", ts)
	}
	if _, _, code := e.run("targets", "delete", "hooks"); code != ExitOK {
		t.Fatal("delete")
	}
	if _, _, code := e.run("targets", "delete", "hooks"); code != ExitNotFound {
		t.Fatalf("delete twice: exit %d, want %d", code, ExitNotFound)
	}
}

// TestUnknownSubcommandIsAUsageError: a misspelt command of a group
// (`idem jobs cancle 5`) is a usage error (exit 2) naming it, for every
// group; it printed the group's help and exited 0, as if it had worked.
// A group alone still prints its help.
func TestUnknownSubcommandIsAUsageError(t *testing.T) {
	t.Parallel()
	groups := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.HasSubCommands() {
				continue
			}
			groups++
			path := strings.Fields(sub.CommandPath())[1:]
			out, errs, code := run(t, append(path, "cancle", "5")...)
			if code != ExitUsage || !strings.Contains(errs, `unknown command "cancle"`) {
				t.Errorf("%s cancle 5: exit %d, stdout %q, stderr %q; want exit %d naming the command", sub.CommandPath(), code, out, errs, ExitUsage)
			}
			if out, _, code := run(t, path...); code != ExitOK || !strings.Contains(out, "Available Commands") {
				t.Errorf("%s alone: exit %d %q; want its help", sub.CommandPath(), code, out)
			}
			walk(sub)
		}
	}
	walk(newRoot(strings.NewReader(""), io.Discard, io.Discard))
	if groups < 9 {
		t.Fatalf("%d command groups found; want the CLI's groups (jobs, dlq, schedules, …)", groups)
	}
}
