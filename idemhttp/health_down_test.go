package idemhttp_test

import (
	"strings"
	"testing"
)

// TestOpsEndpointsStorageDown: with the database gone, GET /v1/health and
// /v1/stats answer 503 problems with Retry-After as the OpenAPI document
// declares them (the validator of setup checks every answer), /readyz 503
// naming the database, and /metrics 200 with idem_store_up 0 — none hangs
// or answers 500.
func TestOpsEndpointsStorageDown(t *testing.T) {
	t.Parallel()
	e, proxy := setupBehindProxy(t)
	e.enqueue(e.keyA, map[string]any{"kind": "k"}) // the keys are verified and cached
	expect(t, e.req("GET", "/v1/health", e.admin, nil), 200, "")
	proxy.Down()

	for _, c := range []struct{ path, key string }{
		{"/v1/health", e.keyA}, {"/v1/health", e.admin}, {"/v1/stats", e.keyA}, {"/v1/idempotency", e.keyA},
	} {
		r := e.req("GET", c.path, c.key, nil)
		expect(t, r, 503, "/problems/service-unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("GET %s: 503 without Retry-After", c.path)
		}
	}
	r := e.req("GET", "/readyz", "", nil)
	expect(t, r, 503, "")
	if c, _ := r.json(t)["checks"].(map[string]any)["database"].(map[string]any); c["status"] != "unhealthy" {
		t.Fatalf("/readyz with the database gone: %s", r.body)
	}
	r = e.req("GET", "/metrics", "", nil)
	expect(t, r, 200, "")
	if !strings.Contains(string(r.body), "\nidem_store_up 0\n") {
		t.Fatalf("/metrics with the database gone: %s", grepLines(string(r.body), "idem_store_up"))
	}
}
