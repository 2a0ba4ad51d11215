package cli

import (
	"strings"
	"testing"
)

// TestDLQRequeueByIDsSaysWhatItMissed: a requeue by ids that could not
// requeue every job it named (one not dead) exits with the conflict code
// and says how many it requeued; it said "requeued 1 jobs" and exited 0,
// as if every named job were back.
func TestDLQRequeueByIDsSaysWhatItMissed(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	dead := e.enqueue("k", "--queue", "pull", "--max-attempts", "1")
	e.killAll("pull", 1)
	waiting := e.enqueue("k", "--queue", "pull")
	out, errs, code := e.run("dlq", "requeue", dead, waiting)
	if code != ExitConflict || !strings.Contains(out, "requeued 1 jobs") || !strings.Contains(errs, "requeued 1 of the 2 jobs named") {
		t.Fatalf("requeue of a dead and a waiting job: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	e.enqueue("k", "--queue", "pull2", "--max-attempts", "1")
	e.killAll("pull2", 1)
	var page struct{ Jobs []struct{ ID string } }
	e.jsonOut(&page, "dlq", "list")
	if len(page.Jobs) != 1 {
		t.Fatalf("dead jobs: %+v", page.Jobs)
	}
	e.ok("requeued 1 jobs", "dlq", "requeue", page.Jobs[0].ID)
}
