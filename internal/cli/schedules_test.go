package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSchedulesCommands drives `idem schedules` against a real server.
func TestSchedulesCommands(t *testing.T) {
	t.Parallel()
	mustRun, api := cliAPI(t)
	out := mustRun("schedules", "put", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
		"--kind", "cdp-build", "--args", `{"full":true}`, "--grain", "day", "--missed", "catch_up")
	if !strings.Contains(out, "schedule nightly: next firing") {
		t.Fatalf("put: %s", out)
	}
	mustRun("schedules", "put", "tick", "--every", "5m", "--kind", "tick")
	// Seed 004's retry policy, 1 s then 5 s then 25 s, given to every firing.
	mustRun("schedules", "put", "fn", "--every", "5m", "--kind", "fn", "--retry", `{"max_attempts":4,"delays":["1s","5s","25s"]}`,
		"--timeout", "45s")
	var fn struct {
		Timeout     string `json:"timeout"`
		MaxAttempts int    `json:"max_attempts"`
		Retry       *struct {
			Delays []string `json:"delays"`
		} `json:"retry"`
	}
	var all []json.RawMessage
	if err := json.Unmarshal([]byte(mustRun("schedules", "list", "--json")), &all); err != nil {
		t.Fatal(err)
	}
	for _, raw := range all {
		var named struct{ Name string }
		if json.Unmarshal(raw, &named) == nil && named.Name == "fn" {
			if err := json.Unmarshal(raw, &fn); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fn.Timeout != "45s" {
		t.Errorf("schedule fn: timeout %q, want 45s (--timeout)", fn.Timeout)
	}
	if fn.Retry == nil || strings.Join(fn.Retry.Delays, ",") != "1s,5s,25s" || fn.MaxAttempts != 4 {
		t.Errorf("schedule fn: max_attempts %d, retry %+v; want 4 and delays 1s,5s,25s", fn.MaxAttempts, fn.Retry)
	}
	_, errs, code := run(t, append([]string{"schedules", "put", "fn", "--every", "5m", "--kind", "fn", "--retry", `{"delays":["soon"]}`}, api...)...)
	if code == 0 || !strings.Contains(errs, "delays") {
		t.Errorf("bad retry delay: exit %d, %s", code, errs)
	}
	mustRun("schedules", "delete", "fn")
	out = mustRun("schedules", "trigger", "nightly", "--key", "deploy-7")
	if !strings.HasPrefix(out, "enqueued job ") {
		t.Fatalf("trigger: %s", out)
	}
	if out = mustRun("schedules", "trigger", "nightly", "--key", "deploy-7"); !strings.HasPrefix(out, "existing job ") {
		t.Fatalf("repeated trigger: %s", out)
	}
	out = mustRun("schedules", "list")
	for _, want := range []string{"NEXT", "nightly", "0 3 * * *", "Europe/Berlin", "catch_up", "available", "tick", "every 5m0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(mustRun("schedules", "list", "--json")), &list); err != nil || len(list) != 2 {
		t.Fatalf("list --json: %v %v", list, err)
	}
	_, errs, code = run(t, append([]string{"schedules", "put", "bad", "--cron", "61 * * * *", "--kind", "k"}, api...)...)
	if code == 0 || !strings.Contains(errs, "cron") {
		t.Errorf("bad cron: exit %d, %s", code, errs)
	}
	mustRun("schedules", "delete", "tick")
	if _, _, code := run(t, append([]string{"schedules", "delete", "tick"}, api...)...); code == 0 {
		t.Errorf("second delete succeeded")
	}
}
