package idemhttp_test

import (
	"net/url"
	"testing"
)

// TestResultLeaseBadInput: every refusal of the lease endpoints names its
// field and reason exactly, and none of them takes, renews, stores or
// releases anything (a release with a token that does not hold the lease
// answers 204, as release is idempotent, and releases nothing): the lease
// acquired first is still held afterwards and completes.
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
	var pcs []problemCase
	for _, c := range cases {
		pc := problemCase{name: c.name, method: "POST", path: base + c.path, body: c.body, status: c.status, typ: c.typ, detail: c.detail}
		if c.name == "another tenant's release" {
			pc.key = e.keyB
		}
		pcs = append(pcs, pc)
	}
	e.checkProblems(t, pcs)
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

// TestTopicsBadInput: every refusal of the topic endpoints (subscriptions,
// the event log, replay) answers its problem and names its field, and
// none of them stores anything.
func TestTopicsBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	sub := "/v1/topics/orders/subscriptions/"
	hook := "http://127.0.0.1:9/hook"
	cases := []struct {
		name, method, path string
		body               any
		status             int
		typ, detail        string
	}{
		{"topic with a space", "PUT", "/v1/topics/" + url.PathEscape("or ders") + "/subscriptions/a", map[string]any{"url": hook}, 400,
			"/problems/invalid-request", "topic: must be printable ASCII without spaces"},
		{"name with a space", "PUT", sub + url.PathEscape("a b"), map[string]any{"url": hook}, 400,
			"/problems/invalid-request", "name: must be printable ASCII without spaces"},
		{"secret not whsec_", "PUT", sub + "a", map[string]any{"url": hook, "secret": "plain"}, 400,
			"/problems/invalid-request", "secret: want whsec_ followed by base64"},
		{"secret not base64", "PUT", sub + "a", map[string]any{"url": hook, "secret": "whsec_!!!"}, 400,
			"/problems/invalid-request", "secret: want whsec_ followed by base64"},
		{"secret too short", "PUT", sub + "a", map[string]any{"url": hook, "secret": "whsec_c2hvcnQ="}, 400,
			"/problems/invalid-request", "secret: want whsec_ followed by base64"},
		{"timeout not a duration", "PUT", sub + "a", map[string]any{"url": hook, "timeout": "soon"}, 400,
			"/problems/invalid-request", `timeout: "soon" is not a duration such as "30s", "168h" or "30" (seconds)`},
		{"negative timeout", "PUT", sub + "a", map[string]any{"url": hook, "timeout": "-1s"}, 400,
			"/problems/invalid-request", "timeout: must not be negative"},
		{"event type with a space", "PUT", sub + "a", map[string]any{"url": hook, "event_types": []string{"a b"}}, 400,
			"/problems/invalid-request", "event_types: must be printable ASCII without spaces"},
		{"subscription without a body", "PUT", sub + "a", nil, 400, "/problems/malformed-json", "a JSON body is required"},
		{"get with a bad name", "GET", sub + url.PathEscape("a b"), nil, 400,
			"/problems/invalid-request", "name: must be printable ASCII without spaces"},
		{"get of none", "GET", sub + "none", nil, 404, "/problems/not-found", ""},
		{"delete with a bad topic", "DELETE", "/v1/topics/" + url.PathEscape("a b") + "/subscriptions/a", nil, 400,
			"/problems/invalid-request", "topic: must be printable ASCII without spaces"},
		{"delete of none", "DELETE", sub + "none", nil, 404, "/problems/not-found", ""},
		{"list with a bad topic", "GET", "/v1/topics/" + url.PathEscape("a b") + "/subscriptions", nil, 400,
			"/problems/invalid-request", "topic: must be printable ASCII without spaces"},
		{"events limit 0", "GET", "/v1/topics/orders/events?limit=0", nil, 400,
			"/problems/invalid-request", "limit: must be an integer from 1 to 500"},
		{"events limit 501", "GET", "/v1/topics/orders/events?limit=501", nil, 400,
			"/problems/invalid-request", "limit: must be an integer from 1 to 500"},
		{"events cursor", "GET", "/v1/topics/orders/events?cursor=zz", nil, 400, "/problems/invalid-request", "cursor: malformed cursor"},
		{"replay with two metadata keys", "POST", "/v1/topics/orders/replay", map[string]any{"metadata": map[string]string{"a": "1", "b": "2"}}, 400,
			"/problems/invalid-request", "metadata: at most one key"},
		{"replay from not a time", "POST", "/v1/topics/orders/replay", map[string]any{"from": "yesterday"}, 400,
			"/problems/invalid-request", ""},
		{"replay without a body", "POST", "/v1/topics/orders/replay", nil, 400, "/problems/malformed-json", "a JSON body is required"},
	}
	var pcs []problemCase
	for _, c := range cases {
		pcs = append(pcs, problemCase{name: c.name, method: c.method, path: c.path, body: c.body, status: c.status, typ: c.typ, detail: c.detail})
	}
	e.checkProblems(t, pcs)
	r := e.req("GET", "/v1/topics/orders/subscriptions", e.keyA, nil)
	expect(t, r, 200, "")
	if subs := r.json(t)["subscriptions"].([]any); len(subs) != 0 {
		t.Fatalf("refused subscriptions were stored: %s", r.body)
	}
}

// problemCase is one request and the answer it must get: status, problem
// type ("" for a success) and, when set, the exact detail and the one
// field that the problem's errors name.
type problemCase struct {
	name, method, path string
	key                string // the bearer secret; "" = tenant a's key
	body               any
	status             int
	typ, detail, field string
}

// checkProblems sends every case as a subtest of t.
func (e *env) checkProblems(t *testing.T, cases []problemCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := c.key
			if key == "" {
				key = e.keyA
			}
			r := e.req(c.method, c.path, key, c.body)
			expect(t, r, c.status, c.typ)
			if c.detail != "" {
				if d := r.json(t)["detail"]; d != c.detail {
					t.Fatalf("detail %q, want %q", d, c.detail)
				}
			}
			if c.field != "" {
				errs, _ := r.json(t)["errors"].(map[string]any)
				if _, ok := errs[c.field]; !ok || len(errs) != 1 {
					t.Fatalf("errors %v, want one for %s", errs, c.field)
				}
			}
		})
	}
}
