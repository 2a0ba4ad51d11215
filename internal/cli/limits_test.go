package cli

import (
	"strings"
	"testing"
)

// TestLimitsAndQueuesCommands: limits set, list and delete, and queues
// pause and resume, against a real server; bad input fails with the
// server's problem and an exit code.
func TestLimitsAndQueuesCommands(t *testing.T) {
	t.Parallel()
	mustRun, api := cliAPI(t)
	mustRun("limits", "set", "--for-tenant", "acme", "--rate", "100/1m")
	mustRun("limits", "set", "--for-queue", "mail", "--rate", "1000/1m", "--concurrency", "20")
	out := mustRun("limits", "list")
	if !strings.Contains(out, "acme") || !strings.Contains(out, "100/1m") || !strings.Contains(out, "1000/1m") {
		t.Fatalf("limits list:\n%s", out)
	}
	if _, errs, code := run(t, append([]string{"limits", "set", "--for-tenant", "acme", "--rate", "fast"}, api...)...); code == 0 || !strings.Contains(errs, "rate") {
		t.Fatalf("bad rate: exit %d, %s", code, errs)
	}
	mustRun("limits", "delete", "--for-tenant", "acme")
	// Tenant "*": the default limit of every tenant.
	if out := mustRun("limits", "set", "--for-tenant", "*", "--for-queue", "mail", "--rate", "10/1m"); !strings.Contains(out, "*") || !strings.Contains(out, "10/1m") {
		t.Fatalf("limits set --for-tenant '*':\n%s", out)
	}
	if out := mustRun("limits", "list"); !strings.Contains(out, "*") || !strings.Contains(out, "10/1m") {
		t.Fatalf("limits list with a default:\n%s", out)
	}
	mustRun("limits", "delete", "--for-tenant", "*", "--for-queue", "mail")
	if _, _, code := run(t, append([]string{"limits", "delete", "--for-tenant", "acme"}, api...)...); code == 0 {
		t.Fatal("deleting a missing limit succeeded")
	}
	if out := mustRun("queues", "pause", "mail"); !strings.Contains(out, "queue mail paused") {
		t.Fatalf("pause: %s", out)
	}
	if out := mustRun("stats"); !strings.Contains(out, "paused: queue mail") || !strings.Contains(out, "1000/1m") {
		t.Fatalf("stats:\n%s", out)
	}
	if out := mustRun("queues", "resume", "mail", "--for-tenant", "acme"); !strings.Contains(out, "tenant acme in queue mail resumed") {
		t.Fatalf("resume: %s", out)
	}
	mustRun("queues", "resume", "mail")
}
