package idemhttp_test

import "testing"

// TestDLQRequeueFilterState: the dead-letter queue holds dead jobs only, so
// a requeue filter naming another state is a 400 (as GET /v1/dlq answers)
// and requeues nothing — not every dead job of the tenant.
func TestDLQRequeueFilterState(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	d := e.dead(e.keyA, "q")
	c := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
	expect(t, e.req("POST", "/v1/jobs/"+c+"/cancel", e.keyA, nil), 200, "")
	for _, body := range []string{`{"filter":{"state":"cancelled"}}`, `{"filter":{"state":["dead","completed"]}}`} {
		r := e.req("POST", "/v1/dlq/requeue", e.keyA, body)
		expect(t, r, 400, "/problems/invalid-request")
		if j := e.req("GET", "/v1/jobs/"+d, e.keyA, nil).json(t); j["state"] != "dead" {
			t.Fatalf("requeue %s moved the dead job %s: %v", body, d, j["state"])
		}
	}
	r := e.req("POST", "/v1/dlq/requeue", e.keyA, `{"filter":{"state":"dead"}}`)
	expect(t, r, 200, "")
	if n := r.json(t)["requeued"]; n != float64(1) {
		t.Fatalf("requeue by state dead: %v, want 1", n)
	}
	if j := e.req("GET", "/v1/jobs/"+c, e.keyA, nil).json(t); j["state"] != "cancelled" {
		t.Fatalf("the cancelled job is %v, want cancelled", j["state"])
	}
}
