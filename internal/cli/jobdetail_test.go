package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
)

// TestJobDetailAndAttempts: `jobs get` shows what a finished job carries
// (result, metadata, dependencies, error), `jobs attempts` each attempt
// with its outcome, worker and error.
func TestJobDetailAndAttempts(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	first := e.enqueue("k", "--queue", "pull", "--metadata", `{"by":"ops"}`, "--max-attempts", "2")
	dep := e.enqueue("after", "--depends-on", first, "--priority", "7")

	cl, err := (&apiFlags{url: e.url, apiKey: e.key}).client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	zero := time.Duration(0)
	jobs, _ := cl.Claim(ctx, claimOne("pull"))
	if _, err := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, &idemclient.FailRequest{Error: "first try\nwith a second line", RetryAfter: &zero}); err != nil {
		t.Fatal(err)
	}
	jobs, _ = cl.Claim(ctx, claimOne("pull"))
	if _, err := cl.Complete(ctx, jobs[0].ID, jobs[0].LeaseToken, json.RawMessage(`{"rows":3}`)); err != nil {
		t.Fatal(err)
	}

	out := e.ok("", "jobs", "get", first)
	for _, want := range []string{"state:", "completed", "attempt:", "2/2", `{"rows":3}`, `{"by":"ops"}`, "first try", "with a second line"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs get lacks %q:\n%s", want, out)
		}
	}
	// Every line is "key:  value" with the values in one column, or a
	// continuation of the value above in that same column.
	col := -1
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		i := len(l) - len(strings.TrimLeft(l[strings.Index(l, ":")+1:], " ")) // start of the value
		if strings.HasPrefix(l, " ") {
			i = len(l) - len(strings.TrimLeft(l, " "))
		}
		if col == -1 {
			col = i
		}
		if i != col {
			t.Errorf("line %q: value at column %d, want %d:\n%s", l, i, col, out)
			break
		}
	}
	out = e.ok("", "jobs", "get", dep)
	if !strings.Contains(out, "depends on:") || !strings.Contains(out, first) || !strings.Contains(out, "priority:") || !strings.Contains(out, "7") {
		t.Errorf("jobs get of a dependant:\n%s", out)
	}

	out = e.ok("ATTEMPT", "jobs", "attempts", first)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "failed") || !strings.Contains(lines[1], "cli-test") ||
		!strings.Contains(lines[1], "first try with a second line") || !strings.Contains(lines[2], "completed") {
		t.Errorf("attempts table:\n%s", out)
	}
	var atts struct {
		Attempts []struct {
			Attempt int    `json:"attempt"`
			Outcome string `json:"outcome"`
			Error   string `json:"error"`
		} `json:"attempts"`
	}
	e.jsonOut(&atts, "jobs", "attempts", first)
	if len(atts.Attempts) != 2 || atts.Attempts[0].Attempt != 1 || atts.Attempts[0].Error != "first try\nwith a second line" || atts.Attempts[1].Outcome != "completed" {
		t.Errorf("attempts --json: %+v", atts)
	}
}
