package cli

import (
	"strings"
	"testing"
)

// TestCommaListsTakeSpaces: a comma-separated list given with spaces after
// the commas ("a, b") is the list of a and b, for a plain string flag
// (--state) and for a list flag (--depends-on); " b" was refused.
func TestCommaListsTakeSpaces(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	a := e.enqueue("k", "--queue", "q")
	b := e.enqueue("k", "--queue", "q")
	e.ok("k", "jobs", "list", "--state", "dead, available")
	var res struct {
		Job struct {
			DependsOn []string `json:"depends_on"`
		}
	}
	e.jsonOut(&res, "enqueue", "k", "--queue", "q", "--depends-on", a+", "+b)
	if strings.Join(res.Job.DependsOn, ",") != a+","+b {
		t.Fatalf("depends_on %q, want %s,%s", res.Job.DependsOn, a, b)
	}
}

// TestDLQRequeueDryRunBadID: a dry run given an id that is not a job id
// exits as the real run does, a usage error (2), not "not found" (3).
func TestDLQRequeueDryRunBadID(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	for _, args := range [][]string{{"dlq", "requeue", "abc"}, {"dlq", "requeue", "abc", "--dry-run"}, {"dlq", "requeue", "007", "--dry-run"}} {
		_, errs, code := e.run(args...)
		if code != ExitUsage || !strings.Contains(errs, "not a job id") {
			t.Errorf("idem %s: exit %d, want %d\nstderr: %s", strings.Join(args, " "), code, ExitUsage, errs)
		}
	}
}
