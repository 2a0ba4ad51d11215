package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// complete asks the CLI for the completions of args (cobra's hidden
// __complete command, what the shell scripts call) and returns the
// candidates.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, errs, code := run(t, append([]string{"__complete"}, args...)...)
	if code != ExitOK {
		t.Fatalf("__complete %v: exit %d %s", args, code, errs)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" && !strings.HasPrefix(l, ":") {
			got = append(got, l)
		}
	}
	return got
}

// TestCompletionOrderAndFailures: states come in lifecycle order, queues
// sorted; a server that cannot answer offers nothing and fails nothing
// (ops_test.go's TestCompletion covers the basics).
func TestCompletionOrderAndFailures(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	e.enqueue("k", "--queue", "mail")
	e.enqueue("k", "--queue", "billing")

	states := complete(t, "jobs", "list", "--state", "")
	if strings.Join(states, ",") != "pending,scheduled,available,running,retryable,completed,dead,cancelled" {
		t.Errorf("--state completes to %v", states)
	}
	queues := complete(t, "jobs", "list", "--url", e.url, "--api-key", e.key, "--queue", "")
	if strings.Join(queues, ",") != "billing,mail" {
		t.Errorf("--queue completes to %v, want the server's queues sorted", queues)
	}
	// No server, no candidates, and no error either.
	if q := complete(t, "jobs", "list", "--url", "http://127.0.0.1:1", "--queue", ""); len(q) != 0 {
		t.Errorf("unreachable server: %v", q)
	}
	// A wrong key is the same: nothing to offer.
	if q := complete(t, "jobs", "list", "--url", e.url, "--api-key", "idem_wrong", "--queue", ""); len(q) != 0 {
		t.Errorf("wrong key: %v", q)
	}
}

func TestKeyCommandJSONAndErrors(t *testing.T) {
	t.Parallel()
	var r keyResult
	out, errs, code := runCLI(t, `{"b":2, "a":[1, 2.50]}`, "key", "--json", "--prefix", "p", "--function", "sync",
		"--tenant", "acme", "--grain", "day", "--zone", "Asia/Tokyo", "--time", "2026-02-06T20:00:00Z")
	if code != ExitOK || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("key --json: %d %q %q", code, out, errs)
	}
	if r.Canonical != `{"a":[1,2.5],"b":2}` || len(r.SHA256) != 64 || !strings.HasPrefix(r.Prefixed, "p_") || r.Scoped != "" {
		t.Errorf("key result %+v", r)
	}
	// 20:00 UTC is already the 7th in Tokyo.
	if !strings.HasPrefix(r.Lock, "sync:acme:2026-02-07") {
		t.Errorf("lock %q, want the date in the zone", r.Lock)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"key", "--function", "f"}, "--tenant"},
		{[]string{"key", "--function", "f", "--tenant", "t", "--zone", "Mars/Base"}, "Mars/Base"},
		{[]string{"key", "--function", "f", "--tenant", "t", "--time", "noon"}, "--time"},
		{[]string{"key", "--prefix", "tab\tprefix"}, "control character"},
		{[]string{"key", "--function", "f:g", "--tenant", "t"}, "function"},
	} {
		_, errs, code := runCLI(t, `{}`, tc.args...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %q, want usage naming %s", tc.args, code, errs, tc.want)
		}
	}
	// The same payload in another key order and spacing is the same key.
	a, _, _ := runCLI(t, `{"x":1,"y":[true,null]}`, "key")
	b, _, _ := runCLI(t, " {\n \"y\" : [ true , null ] , \"x\" : 1.0 }\n", "key")
	if a != b || a == "" {
		t.Errorf("equal JSON, different keys:\n%s\n%s", a, b)
	}
}
