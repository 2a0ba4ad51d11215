package idemhttp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// TestEnqueueTopicKindRefused: the kind "topic:<topic>/<name>" is that of
// a subscription's delivery jobs, matched to the subscription and pushed
// signed with its secrets. POST /v1/jobs refuses it with a 400
// problem+json on "kind", POST /v1/jobs/batch as one item (the other is
// enqueued), POST /v1/batches on "jobs[0].kind" and PUT /v1/schedules on
// "kind"; a publish still makes the subscription's delivery job and a job
// replay copies it. Before the fix each forged job was written (and then
// pushed as a signed event: TestTopicKindForgedPush). Both stores.
func TestEnqueueTopicKindRefused(t *testing.T) {
	t.Parallel()
	bothStores(t, enqueueTopicKind)
}

func enqueueTopicKind(t *testing.T, open opener) {
	e := setup(t, open, nil)
	ctx := context.Background()
	if _, err := e.client.SubscriptionPut(ctx, &idem.Subscription{Tenant: "a", Topic: "orders", Name: "billing",
		URL: "http://127.0.0.1:9/never"}); err != nil {
		t.Fatal(err)
	}
	forged := map[string]any{"kind": "topic:orders/billing", "queue": "hooks", "args": map[string]any{"amount": -1000000}}
	wantProblem := func(what, field string, p map[string]any) {
		t.Helper()
		errs, _ := p["errors"].(map[string]any)
		msg, _ := errs[field].(string)
		if p["status"] != float64(400) || p["type"] != "/problems/invalid-request" || !strings.Contains(msg, `"topic:"`) ||
			!strings.Contains(msg, "reserved") {
			t.Errorf("%s: %v, want a 400 invalid-request problem on %s naming the reserved prefix", what, p, field)
		}
	}
	r := e.req("POST", "/v1/jobs", e.keyA, forged)
	expect(t, r, 400, "/problems/invalid-request")
	wantProblem("POST /v1/jobs", "kind", r.json(t))

	r = e.req("POST", "/v1/jobs/batch", e.keyA, map[string]any{"jobs": []any{map[string]any{"kind": "y", "queue": "hooks"}, forged}})
	expect(t, r, 200, "")
	results, _ := r.json(t)["results"].([]any)
	if len(results) != 2 {
		t.Fatalf("%d results, want 2: %s", len(results), r.body)
	}
	first, _ := results[0].(map[string]any)
	second, _ := results[1].(map[string]any)
	if first["job"] == nil || first["error"] != nil {
		t.Errorf("item 0: %v, want its job", first)
	}
	p, _ := second["error"].(map[string]any)
	wantProblem("POST /v1/jobs/batch item 1", "kind", p)

	r = e.req("POST", "/v1/batches", e.keyA, map[string]any{"key": "b1", "jobs": []any{forged}})
	expect(t, r, 400, "/problems/invalid-request")
	wantProblem("POST /v1/batches", "jobs[0].kind", r.json(t))

	r = e.req("PUT", "/v1/schedules/forge", e.keyA, map[string]any{"every": "1h", "kind": "topic:orders/billing", "queue": "hooks"})
	expect(t, r, 400, "/problems/invalid-request")
	wantProblem("PUT /v1/schedules/forge", "kind", r.json(t))

	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs written, want 1 (the batch's valid item)", n)
	}

	// The fan-out and a replay of its job keep the kind.
	r = e.req("POST", "/v1/topics/orders/events", e.keyA, map[string]any{"type": "order.paid", "payload": map[string]any{"amount": 1200}})
	expect(t, r, 201, "")
	// A replay copies finished jobs only (no worker runs here): the
	// delivery job is cancelled first.
	pubJobs, _, err := e.st.JobList(ctx, &store.JobListParams{Filter: store.JobFilter{Kind: "topic:orders/billing"}, Limit: 10})
	if err != nil || len(pubJobs) != 1 {
		t.Fatalf("the publish's delivery job: %d, %v", len(pubJobs), err)
	}
	expect(t, e.req("POST", fmt.Sprintf("/v1/jobs/%d/cancel", pubJobs[0].ID), e.keyA, nil), 200, "")
	r = e.req("POST", "/v1/jobs/replay", e.keyA, map[string]any{"filter": map[string]any{"kind": "topic:orders/billing"}})
	expect(t, r, 200, "")
	jobs, _, err := e.st.JobList(ctx, &store.JobListParams{Filter: store.JobFilter{Kind: "topic:orders/billing"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Queue != idem.DefaultTopicQueue || jobs[1].Queue != idem.DefaultTopicQueue {
		t.Fatalf("%d delivery jobs of the subscription, want 2 in %q (the publish's and its replay)", len(jobs), idem.DefaultTopicQueue)
	}
}
