package ui_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

// TestDLQRequeueAllBeyondOneBatch: "Requeue all…" requeues every dead job
// its confirmation counted. Before the fix it sent one requeue by filter,
// which the server caps at 1,000 jobs: the confirmation said "This
// requeues 1001", the button "Requeue 1001 job(s)", and one job stayed
// dead.
func TestDLQRequeueAllBeyondOneBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	ctx := context.Background()
	cl := e.api(e.keyA)
	const n = 1001
	for left := n; left > 0; left -= 1000 {
		reqs := make([]*idemclient.EnqueueRequest, min(left, 1000))
		for i := range reqs {
			reqs[i] = &idemclient.EnqueueRequest{Kind: "sync", Queue: "bulk", MaxAttempts: 1}
		}
		if _, err := cl.EnqueueBatch(ctx, reqs); err != nil {
			t.Fatal(err)
		}
	}
	for dead := 0; dead < n; {
		jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"bulk"}, WorkerID: "w", Limit: 100})
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
	if page := body(t, e.get("/ui/dlq/requeue?queue=bulk", a)); !strings.Contains(page, "This requeues <strong>1001</strong> dead job(s)") {
		t.Fatalf("confirm:\n%s", page)
	}
	token := e.csrf("/ui/dlq", a)
	page := e.submit(t, "/ui/dlq/requeue", url.Values{"csrf": {token}, "queue": {"bulk"}}, a)
	left, err := cl.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Queue: "bulk"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "Requeued 1001 dead jobs.") || len(left.Jobs) != 0 {
		t.Fatalf("requeue all: %d dead jobs left; page:\n%s", len(left.Jobs), page)
	}
}

// TestDLQRequeueAllLeavesResolved: "Requeue all…" counts and requeues the
// unresolved dead jobs of its queue only: a resolved one is dealt with and
// kept for audit. Before the fix it counted and requeued it too.
func TestDLQRequeueAllLeavesResolved(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	ctx := context.Background()
	cl := e.api(e.keyA)
	reqs := []*idemclient.EnqueueRequest{{Kind: "sync", Queue: "bulk", MaxAttempts: 1}, {Kind: "sync", Queue: "bulk", MaxAttempts: 1}}
	if _, err := cl.EnqueueBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"bulk"}, WorkerID: "w", Limit: 2})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if _, err := cl.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.DLQResolve(ctx, jobs[0].ID, "handled"); err != nil {
		t.Fatal(err)
	}
	if page := body(t, e.get("/ui/dlq/requeue?queue=bulk", a)); !strings.Contains(page, "This requeues <strong>1</strong> dead job(s)") {
		t.Fatalf("confirm:\n%s", page)
	}
	token := e.csrf("/ui/dlq", a)
	page := e.submit(t, "/ui/dlq/requeue", url.Values{"csrf": {token}, "queue": {"bulk"}}, a)
	left, err := cl.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Queue: "bulk"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "Requeued 1 dead jobs.") || len(left.Jobs) != 1 || left.Jobs[0].ID != jobs[0].ID {
		t.Fatalf("requeue all: dead jobs left %v, want the resolved %s; page:\n%s", left.Jobs, jobs[0].ID, page)
	}
}

// TestDLQGroupsCountWhatRequeueAllRequeues: the group table's count of
// dead jobs is the count "Requeue all…" confirms and requeues (unresolved
// ones), with the resolved ones (kept for audit) counted apart; a group of
// resolved jobs only offers no "Requeue all…". The table counted resolved
// jobs in, so a group read 3 and its confirmation "0 job(s)".
func TestDLQGroupsCountWhatRequeueAllRequeues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	ctx := context.Background()
	cl := e.api(e.keyA)
	reqs := []*idemclient.EnqueueRequest{{Kind: "sync", Queue: "grp", MaxAttempts: 1}, {Kind: "sync", Queue: "grp", MaxAttempts: 1},
		{Kind: "sync", Queue: "grp", MaxAttempts: 1}, {Kind: "done", Queue: "grp", MaxAttempts: 1}}
	if _, err := cl.EnqueueBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"grp"}, WorkerID: "w", Limit: 4})
	if err != nil || len(jobs) != 4 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if _, err := cl.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
			t.Fatal(err)
		}
	}
	resolved := 0
	for _, j := range jobs {
		if j.Kind == "done" || resolved < 2 {
			if j.Kind == "sync" {
				resolved++
			}
			if _, err := cl.DLQResolve(ctx, j.ID, "handled"); err != nil {
				t.Fatal(err)
			}
		}
	}
	page := body(t, e.get("/ui/dlq", a))
	for _, want := range []string{
		`kind=sync">sync</a></td><td>1</td><td>2</td>`,
		`kind=done">done</a></td><td>0</td><td>1</td>`,
		`href="/ui/dlq/requeue?queue=grp&amp;kind=sync"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("dead-letter groups: no %s in\n%s", want, page)
		}
	}
	if strings.Contains(page, `href="/ui/dlq/requeue?queue=grp&amp;kind=done"`) {
		t.Errorf("a group of resolved jobs only offers Requeue all…:\n%s", page)
	}
	if page := body(t, e.get("/ui/dlq/requeue?queue=grp&kind=sync", a)); !strings.Contains(page, "This requeues <strong>1</strong> dead job(s)") {
		t.Errorf("confirm of the group:\n%s", page)
	}
}
