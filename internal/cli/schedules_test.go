package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSchedulesCommands drives `idem schedules` against a real server.
func TestSchedulesCommands(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	mustRun := func(args ...string) string {
		t.Helper()
		out, errs, code := run(t, append(args, api...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	out := mustRun("schedules", "put", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
		"--kind", "cdp-build", "--args", `{"full":true}`, "--grain", "day", "--missed", "catch_up")
	if !strings.Contains(out, "schedule nightly: next firing") {
		t.Fatalf("put: %s", out)
	}
	mustRun("schedules", "put", "tick", "--every", "5m", "--kind", "tick")
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
	_, errs, code := run(t, append([]string{"schedules", "put", "bad", "--cron", "61 * * * *", "--kind", "k"}, api...)...)
	if code == 0 || !strings.Contains(errs, "cron") {
		t.Errorf("bad cron: exit %d, %s", code, errs)
	}
	mustRun("schedules", "delete", "tick")
	if _, _, code := run(t, append([]string{"schedules", "delete", "tick"}, api...)...); code == 0 {
		t.Errorf("second delete succeeded")
	}
}
