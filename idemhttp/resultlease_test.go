package idemhttp_test

import (
	"net/url"
	"testing"
)

// TestResultLeaseBadInput: every refusal of the lease endpoints names its
// field and reason exactly, and none of them takes, renews, stores or
// releases anything (a release with a token that does not hold the lease
// answers 204, as release is idempotent, and releases nothing): the lease acquired first is still held afterwards and
// completes.
func TestResultLeaseBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	base := "/v1/idempotency/lease-bad"
	r := e.req("POST", base+"/lease", e.keyA, map[string]any{"lease": "1m"})
	expect(t, r, 200, "")
	token := r.json(t)["lease_token"].(string)
	cases := []struct {
		name, path string
		body       any
		status     int
		typ        string
		detail     string
	}{
		{"lease below 1s", "/lease", map[string]any{"lease": "999ms"}, 400, "/problems/invalid-request", "lease: must be at least 1s"},
		{"negative lease", "/lease", map[string]any{"lease": "-5s"}, 400, "/problems/invalid-request", "lease: must not be negative"},
		{"lease not a duration", "/lease", map[string]any{"lease": "soon"}, 400, "/problems/invalid-request",
			`lease: "soon" is not a duration such as "30s", "168h" or "30" (seconds)`},
		{"zero result_ttl", "/lease", map[string]any{"result_ttl": "0"}, 400, "/problems/invalid-request", "result_ttl: must be positive"},
		{"unknown field", "/lease", map[string]any{"leese": "1m"}, 400, "/problems/invalid-request", ""},
		{"lease of the wrong type", "/lease", map[string]any{"lease": 30}, 400, "/problems/invalid-request", "lease: must be a string, not number"},
		{"trailing data", "/lease", `{"lease":"1m"} {}`, 400, "/problems/malformed-json", "unexpected data after the JSON value"},
		{"renew without a body", "/lease/renew", nil, 400, "/problems/malformed-json", "a JSON body is required"},
		{"renew with a short lease", "/lease/renew", map[string]any{"lease_token": token, "lease": "500ms"}, 400,
			"/problems/invalid-request", "lease: must be at least 1s"},
		{"renew with another token", "/lease/renew", map[string]any{"lease_token": "not-mine"}, 409, "/problems/lease-lost", ""},
		{"complete without a body", "/lease/complete", nil, 400, "/problems/malformed-json", "a JSON body is required"},
		{"complete with a negative duration", "/lease/complete", map[string]any{"lease_token": token, "duration_ms": -1}, 400,
			"/problems/invalid-request", "duration_ms: must not be negative"},
		{"complete with a zero result_ttl", "/lease/complete", map[string]any{"lease_token": token, "result_ttl": "0s"}, 400,
			"/problems/invalid-request", "result_ttl: must be positive"},
		{"release with a lease", "/lease/release", map[string]any{"lease_token": token, "lease": "1m"}, 400,
			"/problems/invalid-request", "lease: only renew takes a lease"},
		{"release without a body", "/lease/release", nil, 400, "/problems/malformed-json", "a JSON body is required"},
		// Release is idempotent (store.Records.RecordRelease): a token that
		// does not hold the lease answers 204 and releases nothing, checked
		// below by the lease still being held.
		{"release with another token", "/lease/release", map[string]any{"lease_token": "not-mine"}, 204, "", ""},
		{"another tenant's release", "/lease/release", map[string]any{"lease_token": token}, 204, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := e.keyA
			if c.name == "another tenant's release" {
				key = e.keyB
			}
			r := e.req("POST", base+c.path, key, c.body)
			expect(t, r, c.status, c.typ)
			if c.detail == "" {
				return
			}
			if d := r.json(t)["detail"]; d != c.detail {
				t.Fatalf("detail %q, want %q", d, c.detail)
			}
		})
	}
	t.Run("the first lease is still held and completes", func(t *testing.T) {
		expect(t, e.req("POST", base+"/lease", e.keyA, nil), 409, "/problems/idempotency-key-in-progress")
		r := e.req("POST", base+"/lease/complete", e.keyA, map[string]any{"lease_token": token, "result": "ok"})
		expect(t, r, 200, "")
		if m := r.json(t); m["key"] != "lease-bad" || m["result"] != "ok" || m["cached"] != false {
			t.Fatalf("complete: %s", r.body)
		}
	})
	t.Run("renew after completion is a lost lease", func(t *testing.T) {
		expect(t, e.req("POST", base+"/lease/renew", e.keyA, map[string]any{"lease_token": token}), 409, "/problems/lease-lost")
	})
	t.Run("a key that is not valid is refused on every lease path", func(t *testing.T) {
		for _, p := range []string{"/lease", "/lease/renew", "/lease/complete", "/lease/release"} {
			r := e.req("POST", "/v1/idempotency/"+url.PathEscape("bad\x00key")+p, e.keyA, map[string]any{"lease_token": token})
			expect(t, r, 400, "/problems/invalid-request")
		}
	})
}
