package idemhttp_test

import "testing"

// TestScheduleDedupForever: a schedule takes dedup_window "forever" as an
// enqueue does (docs/schedules.md: the job fields work as for an
// enqueue), answers it as "forever", and a trigger's job is made.
func TestScheduleDedupForever(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	r := e.req("PUT", "/v1/schedules/yearly", e.keyA, map[string]any{"every": "1h", "kind": "archive", "dedup_window": "forever"})
	expect(t, r, 200, "")
	if got := r.json(t)["dedup_window"]; got != "forever" {
		t.Fatalf("put answered dedup_window %v; want \"forever\": %s", got, r.body)
	}
	if got := e.req("GET", "/v1/schedules/yearly", e.keyA, nil).json(t)["dedup_window"]; got != "forever" {
		t.Fatalf("get answered dedup_window %v; want \"forever\"", got)
	}
	expect(t, e.req("POST", "/v1/schedules/yearly/trigger", e.keyA, nil), 201, "")
}
