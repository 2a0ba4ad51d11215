package idemhttp_test

import (
	"testing"
)

// TestRefusedRequestDoesNotSpendItsKey: a request the server refuses as
// sent (400 bad input, 415 wrong media type, 413 too large: nothing ran)
// is not stored under its Idempotency-Key, so the corrected request sent
// again with the same key runs (not a 422 for another request, nor the
// stored refusal); a request that ran is stored as before.
func TestRefusedRequestDoesNotSpendItsKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	path := "/v1/jobs/" + id + "/cancel"
	for i, bad := range []struct {
		body   any
		hdr    []string
		status int
	}{
		{body: `{"no_such_field":1}`, status: 400},
		{body: `{}`, hdr: []string{"Content-Type", "text/plain"}, status: 415},
		{body: `{"reason":"`, status: 400},
	} {
		key := "refused-" + string(rune('a'+i))
		r := e.req("POST", path, e.keyA, bad.body, append([]string{"Idempotency-Key", key}, bad.hdr...)...)
		expect(t, r, bad.status, "")
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("case %d: the refusal was a replay", i)
		}
		// The same refused request again is refused again, not replayed.
		r = e.req("POST", path, e.keyA, bad.body, append([]string{"Idempotency-Key", key}, bad.hdr...)...)
		expect(t, r, bad.status, "")
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("case %d: the refusal was stored and replayed", i)
		}
	}
	// The corrected request with the first refused key runs.
	r := e.req("POST", path, e.keyA, map[string]any{}, "Idempotency-Key", "refused-a")
	expect(t, r, 200, "")
	// ...and is stored: its retry is a replay.
	r = e.req("POST", path, e.keyA, map[string]any{}, "Idempotency-Key", "refused-a")
	expect(t, r, 200, "")
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the cancel that ran was not replayed: %v", r.header)
	}
}

// TestRepliesAreNotSniffed: API replies write <, > and & unescaped in their
// JSON, so every one, problems and replays included, says
// X-Content-Type-Options: nosniff (no browser takes one for HTML).
func TestRepliesAreNotSniffed(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "args": map[string]any{"html": "<script>"}})
	cancel := func() *resp {
		return e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, map[string]any{}, "Idempotency-Key", "sniff")
	}
	for name, r := range map[string]*resp{
		"job":      e.req("GET", "/v1/jobs/"+id, e.keyA, nil),
		"problem":  e.req("GET", "/v1/jobs/999999", e.keyA, nil),
		"no route": e.req("GET", "/v1/no-such-route", e.keyA, nil),
		"cancel":   cancel(),
		"replay":   cancel(),
		"probe":    e.req("GET", "/healthz", "", nil),
	} {
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (%d): X-Content-Type-Options %q, want nosniff", name, r.status, got)
		}
	}
}

// TestRefusedQueryDoesNotSpendItsKey: a parameter the route does not take
// is refused inside the Idempotency-Key middleware (a 400, not stored), so
// the same request without it, under the same key, runs and is stored.
func TestRefusedQueryDoesNotSpendItsKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	body := map[string]any{"kind": "k"}
	for range 2 {
		r := e.req("POST", "/v1/jobs?queu=x", e.keyA, body, "Idempotency-Key", "q-refused")
		expect(t, r, 400, "")
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the refusal was a replay: %s", r.body)
		}
	}
	r := e.req("POST", "/v1/jobs", e.keyA, body, "Idempotency-Key", "q-refused")
	expect(t, r, 201, "")
	r = e.req("POST", "/v1/jobs", e.keyA, body, "Idempotency-Key", "q-refused")
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the corrected request's retry was not a replay: %d %s", r.status, r.body)
	}
	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	// A route behind the middleware (requeue) alike.
	filter := map[string]any{"filter": map[string]any{}}
	for range 2 {
		expect(t, e.req("POST", "/v1/dlq/requeue?queu=x", e.keyA, filter, "Idempotency-Key", "rq-refused"), 400, "")
	}
	expect(t, e.req("POST", "/v1/dlq/requeue", e.keyA, filter, "Idempotency-Key", "rq-refused"), 200, "")
	if r := e.req("POST", "/v1/dlq/requeue", e.keyA, filter, "Idempotency-Key", "rq-refused"); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the corrected requeue's retry was not a replay: %d %s", r.status, r.body)
	}
}
