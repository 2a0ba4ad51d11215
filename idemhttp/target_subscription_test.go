package idemhttp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// TestEnqueueNamingSubscriptionTarget: a job whose metadata names the
// stored target of a subscription ({"delivery_target": "orders/billing"})
// is refused by POST /v1/jobs with a 400 problem+json on "metadata", and
// as one item of POST /v1/jobs/batch, whose other items are enqueued.
// Before the fix both were enqueued, to be pushed to the subscription's
// URL signed with its secrets. Both stores.
func TestEnqueueNamingSubscriptionTarget(t *testing.T) {
	t.Parallel()
	bothStores(t, enqueueNamingSubscription)
}

func enqueueNamingSubscription(t *testing.T, open opener) {
	e := setup(t, open, nil)
	if _, err := e.client.SubscriptionPut(context.Background(), &idem.Subscription{Tenant: "a", Topic: "orders", Name: "billing",
		URL: "http://127.0.0.1:9/never"}); err != nil {
		t.Fatal(err)
	}
	named := map[string]any{"kind": "x", "queue": "hooks", "metadata": map[string]any{"delivery_target": "orders/billing"}}
	wantProblem := func(what string, p map[string]any) {
		t.Helper()
		errs, _ := p["errors"].(map[string]any)
		msg, _ := errs["metadata"].(string)
		if p["status"] != float64(400) || p["type"] != "/problems/invalid-request" || !strings.Contains(msg, "subscription") {
			t.Errorf("%s: %v, want a 400 invalid-request problem on metadata naming the subscription", what, p)
		}
	}
	r := e.req("POST", "/v1/jobs", e.keyA, named)
	expect(t, r, 400, "/problems/invalid-request")
	wantProblem("POST /v1/jobs", r.json(t))

	r = e.req("POST", "/v1/jobs/batch", e.keyA, map[string]any{"jobs": []any{map[string]any{"kind": "y", "queue": "hooks"}, named}})
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
	wantProblem("POST /v1/jobs/batch item 1", p)
	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs written, want 1", n)
	}
}
