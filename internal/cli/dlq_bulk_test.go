package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

// makeManyDead makes n dead jobs of kind in queue "dq" through the HTTP
// API, claiming them in pages.
func makeManyDead(t *testing.T, url, key, kind string, n int) {
	t.Helper()
	ctx := context.Background()
	cl, err := idemclient.New(url, &idemclient.Config{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for left := n; left > 0; left -= 1000 {
		reqs := make([]*idemclient.EnqueueRequest, min(left, 1000))
		for i := range reqs {
			reqs[i] = &idemclient.EnqueueRequest{Kind: kind, Queue: "dq", MaxAttempts: 1}
		}
		if _, err := cl.EnqueueBatch(ctx, reqs); err != nil {
			t.Fatal(err)
		}
	}
	for dead := 0; dead < n; {
		jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"dq"}, WorkerID: "w", Limit: 100})
		if err != nil || len(jobs) == 0 {
			t.Fatalf("claim: %d %v", len(jobs), err)
		}
		for _, j := range jobs {
			if _, err := cl.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
				t.Fatal(err)
			}
			dead++
		}
	}
}

// TestDLQRequeueBeyondOneBatch: `dlq requeue --all --limit N` with N above
// the API's 1,000 ids per request requeues all N (in several requests)
// instead of failing as a usage error with nothing requeued.
func TestDLQRequeueBeyondOneBatch(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	makeManyDead(t, url, key, "flaky", 1005)
	out, errs, code := run(t, append([]string{"dlq", "requeue", "--all", "--limit", "2000"}, api...)...)
	if code != 0 || !strings.Contains(out, "requeued 1005 jobs") {
		t.Fatalf("requeue of 1005: exit %d %q %q", code, out, errs)
	}
	out, _, code = run(t, append([]string{"dlq", "list", "--json"}, api...)...)
	if code != 0 || !strings.Contains(out, `"jobs": []`) {
		t.Fatalf("dead jobs left: %d %s", code, out)
	}
}

// TestDLQRequeueByResolved: --resolved alone is a filter (it selects), as
// --queue or --error-code are: `dlq requeue --resolved false` requeues the
// unresolved dead jobs and leaves the resolved ones, instead of asking
// for a filter.
func TestDLQRequeueByResolved(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	makeManyDead(t, e.url, e.key, "flaky", 2)
	var page struct{ Jobs []struct{ ID string } }
	e.jsonOut(&page, "dlq", "list")
	if len(page.Jobs) != 2 {
		t.Fatalf("dead jobs: %+v", page.Jobs)
	}
	resolved := page.Jobs[0].ID
	e.ok("", "dlq", "resolve", resolved, "--note", "handled")
	e.ok("requeued 1 jobs", "dlq", "requeue", "--resolved", "false")
	e.jsonOut(&page, "dlq", "list")
	if len(page.Jobs) != 1 || page.Jobs[0].ID != resolved {
		t.Fatalf("dead jobs left: %+v, want only the resolved %s", page.Jobs, resolved)
	}
}

// TestDLQRequeueByQueueLeavesResolved: `dlq requeue --queue` (and --all)
// leaves the resolved dead jobs (dealt with, kept for audit) unless
// --resolved is given, as POST /v1/dlq/requeue by filter does. Before the
// fix it requeued them with the others.
func TestDLQRequeueByQueueLeavesResolved(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	makeManyDead(t, e.url, e.key, "flaky", 3)
	var page struct{ Jobs []struct{ ID string } }
	e.jsonOut(&page, "dlq", "list")
	if len(page.Jobs) != 3 {
		t.Fatalf("dead jobs: %+v", page.Jobs)
	}
	resolved := page.Jobs[0].ID
	e.ok("", "dlq", "resolve", resolved, "--note", "handled")
	e.ok("requeued 1 jobs", "dlq", "requeue", "--queue", "dq", "--limit", "1")
	e.ok("requeued 1 jobs", "dlq", "requeue", "--all")
	e.jsonOut(&page, "dlq", "list")
	if len(page.Jobs) != 1 || page.Jobs[0].ID != resolved {
		t.Fatalf("dead jobs left: %+v, want only the resolved %s", page.Jobs, resolved)
	}
	e.ok("requeued 1 jobs", "dlq", "requeue", "--queue", "dq", "--resolved", "true")
}
