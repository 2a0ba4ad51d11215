package idemhttp_test

import "testing"

// TestResultLeaseReplaysByIdempotencyKey: the lease endpoints go through
// the Idempotency-Key middleware, so the retry of an acquire whose 200 was
// lost gets that lease again (not a 409 for its own lease), and likewise
// for complete and release. A 409 (the key held by another holder) is not
// stored: a retry with its key asks again.
func TestResultLeaseReplaysByIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	base := "/v1/idempotency/lease-replay"
	body := map[string]any{"lease": "1m"}
	r := e.req("POST", base+"/lease", e.keyA, body, "Idempotency-Key", "acq-1")
	expect(t, r, 200, "")
	token := r.json(t)["lease_token"].(string)
	r = e.req("POST", base+"/lease", e.keyA, body, "Idempotency-Key", "acq-1")
	expect(t, r, 200, "")
	if r.json(t)["lease_token"] != token || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry of the acquire: %s %v", r.body, r.header)
	}
	// Another caller finds the key held; its 409 is not replayed once the
	// holder is done.
	expect(t, e.req("POST", base+"/lease", e.keyA, body, "Idempotency-Key", "acq-2"), 409, "/problems/idempotency-key-in-progress")
	done := map[string]any{"lease_token": token, "result": map[string]any{"ok": true}}
	expect(t, e.req("POST", base+"/lease/complete", e.keyA, done, "Idempotency-Key", "done-1"), 200, "")
	r = e.req("POST", base+"/lease/complete", e.keyA, done, "Idempotency-Key", "done-1")
	expect(t, r, 200, "")
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry of the complete: %s %v", r.body, r.header)
	}
	r = e.req("POST", base+"/lease", e.keyA, body, "Idempotency-Key", "acq-2")
	expect(t, r, 200, "")
	if m := r.json(t); m["cached"] != true || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry of the acquire that saw the key held: %s %v", r.body, r.header)
	}
	// The same key with another request is 422.
	expect(t, e.req("POST", base+"/lease", e.keyA, map[string]any{"lease": "2m"}, "Idempotency-Key", "acq-1"), 422, "/problems/idempotency-key-reused")
}
