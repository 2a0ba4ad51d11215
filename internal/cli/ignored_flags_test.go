package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// unreachableAPI is a server URL nothing listens on: a command that got as
// far as a request would fail with exit code 1, not the usage error (2)
// the tests below want before any request.
var unreachableAPI = []string{"--url", "http://127.0.0.1:1", "--api-key", "idem_x"}

// TestContradictoryOrIgnoredArgsAreUsageErrors: an argument or flag a
// command would not use, or one that another contradicts, is a usage
// error (exit code 2) naming it, before any request; it was accepted and
// silently ignored.
func TestContradictoryOrIgnoredArgsAreUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		// batch create takes no argument: "extra" was dropped.
		{[]string{"batch", "create", "extra", "--key", "k", "--file", "-"}, `unknown command "extra"`},
		// subscribe sent the secret and dropped --unsigned.
		{[]string{"topics", "subscribe", "t", "s", "--target-url", "http://127.0.0.1:9/h", "--unsigned",
			"--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "--unsigned"},
		// dlq requeue by ids dropped every filter flag and --all.
		{[]string{"dlq", "requeue", "5", "--queue", "billing"}, "--queue"},
		{[]string{"dlq", "requeue", "5", "--all"}, "--all"},
		{[]string{"dlq", "requeue", "5", "6", "--limit", "1"}, "--limit"},
		{[]string{"dlq", "requeue", "5", "--cursor", "abc"}, "--cursor"},
		{[]string{"dlq", "requeue", "5", "--resolved", "true"}, "--resolved"},
		// topics replay kept the last --metadata and replayed its events.
		{[]string{"topics", "replay", "t", "--metadata", "region=eu", "--metadata", "tier=gold"}, "--metadata"},
		// idem key printed no lock or scoped key and dropped the parts of one.
		{[]string{"key", "--grain", "week", "--tenant", "t"}, "--grain"},
		{[]string{"key", "--zone", "Mars/X"}, "--zone"},
		{[]string{"key", "--time", "yesterday"}, "--time"},
		{[]string{"key", "--user", "u"}, "--user"},
		{[]string{"key", "--tenant", "t"}, "--tenant"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:2], " ")+" "+c.want, func(t *testing.T) {
			api := unreachableAPI
			if c.args[0] == "key" {
				api = nil // no server
			}
			_, errs, code := run(t, append(c.args, api...)...)
			if code != ExitUsage || !strings.Contains(errs, c.want) {
				t.Fatalf("idem %s: exit %d, want %d with %q:\n%s", strings.Join(c.args, " "), code, ExitUsage, c.want, errs)
			}
			_, errs, code = run(t, append(append(c.args, "--json"), api...)...)
			var body struct {
				Error struct {
					Message  string `json:"message"`
					ExitCode int    `json:"exit_code"`
				} `json:"error"`
			}
			if code != ExitUsage || json.Unmarshal([]byte(errs), &body) != nil || body.Error.ExitCode != ExitUsage ||
				!strings.Contains(body.Error.Message, c.want) {
				t.Fatalf("--json: exit %d:\n%s", code, errs)
			}
		})
	}
}

// TestDLQRequeueDryRunByIDs: a dry run by ids lists only the named jobs a
// real run requeues (the dead ones) and exits as the real run does: 4 when
// some named job is not dead, 3 when one does not exist. It listed every
// id it was given and exited 0.
func TestDLQRequeueDryRunByIDs(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	dead := e.enqueue("k", "--queue", "dry", "--max-attempts", "1")
	e.killAll("dry", 1)
	live := e.enqueue("k", "--queue", "other")

	out := e.ok("would requeue 1 jobs (dry run)", "dlq", "requeue", dead, "--dry-run")
	if !strings.Contains(out, "\n"+dead+"\n") {
		t.Fatalf("dry run does not list the dead job %s:\n%s", dead, out)
	}
	out, errs, code := e.run("dlq", "requeue", dead, live, "--dry-run")
	if code != ExitConflict || strings.Contains(out, "\n"+live+"\n") || !strings.Contains(out, "\n"+dead+"\n") ||
		!strings.Contains(errs, "1 of the 2 jobs named") {
		t.Fatalf("dry run with a job that is not dead: exit %d, want %d\nstdout: %s\nstderr: %s", code, ExitConflict, out, errs)
	}
	var res struct {
		IDs    []string `json:"ids"`
		DryRun bool     `json:"dry_run"`
	}
	out, _, code = e.run("dlq", "requeue", dead, live, "--dry-run", "--json")
	if code != ExitConflict || json.Unmarshal([]byte(out), &res) != nil || !res.DryRun || len(res.IDs) != 1 || res.IDs[0] != dead {
		t.Fatalf("dry run --json: exit %d %q", code, out)
	}
	if _, errs, code := e.run("dlq", "requeue", "987654", "--dry-run"); code != ExitNotFound {
		t.Fatalf("dry run of a job that does not exist: exit %d, want %d: %s", code, ExitNotFound, errs)
	}
	// The real run agrees with the dry run.
	if _, _, code := e.run("dlq", "requeue", dead, live); code != ExitConflict {
		t.Fatalf("real run: exit %d, want %d", code, ExitConflict)
	}
	var job struct{ State string }
	e.jsonOut(&job, "jobs", "get", dead)
	if job.State != "available" {
		t.Fatalf("job %s after the real run: %s", dead, job.State)
	}
}
