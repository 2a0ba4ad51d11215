package idemhttp_test

import (
	"fmt"
	"testing"
)

// TestEventListLimits: the event log takes limits up to 500; a limit that
// is not a positive integer and a malformed cursor are 400. (Above 500 it
// answers 400, as its OpenAPI schema says; the job lists clamp instead.)
// Another tenant's log is never seen.
func TestEventListLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for i := range 3 {
		expect(t, e.req("POST", "/v1/topics/orders/events", e.keyA, map[string]any{"payload": map[string]int{"n": i}}), 201, "")
	}
	for _, limit := range []string{"1", "3", "500"} {
		r := e.req("GET", "/v1/topics/orders/events?limit="+limit, e.keyA, nil)
		expect(t, r, 200, "")
		if n := len(r.json(t)["events"].([]any)); n != min(3, atoi(limit)) {
			t.Errorf("limit %s: %d events", limit, n)
		}
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=ten", "limit=501", "cursor=abc"} {
		expect(t, e.req("GET", "/v1/topics/orders/events?"+q, e.keyA, nil), 400, "/problems/invalid-request")
	}
	// Another tenant's log is empty.
	r := e.req("GET", "/v1/topics/orders/events", e.keyB, nil)
	expect(t, r, 200, "")
	if evs := r.json(t)["events"].([]any); len(evs) != 0 {
		t.Errorf("tenant b sees %d of tenant a's events", len(evs))
	}
}

func atoi(s string) int {
	var n int
	_, _ = fmt.Sscan(s, &n)
	return n
}
