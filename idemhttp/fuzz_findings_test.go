package idemhttp_test

import (
	"strings"
	"testing"
)

// TestFuzzFindings keeps the inputs the fuzz targets of fuzz_more_test.go
// found: each is answered with a problem naming the field, and writes nothing.
func TestFuzzFindings(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	expect(t, e.req("PUT", "/v1/limits/tenant/a", e.admin, map[string]any{"concurrency": 7}), 200, "")
	e.checkProblems(t, []problemCase{
		// A malformed query string named no field.
		{name: "malformed query", method: "GET", path: "/v1/topics/orders/events?queue=%", status: 400,
			typ: "/problems/invalid-request", field: "query"},
		// ?queue= (empty) was taken for no queue: the PUT replaced the
		// tenant-wide limit and the DELETE removed it.
		{name: "put limit empty queue", method: "PUT", path: "/v1/limits/tenant/a?queue=", key: e.admin,
			body: map[string]any{"concurrency": 2}, status: 400, typ: "/problems/invalid-request", field: "queue"},
		{name: "delete limit empty queue", method: "DELETE", path: "/v1/limits/tenant/a?queue=", key: e.admin,
			status: 400, typ: "/problems/invalid-request", field: "queue"},
		// An empty limit was taken for none (the document refuses it).
		{name: "jobs empty limit", method: "GET", path: "/v1/jobs?limit=", status: 400,
			typ: "/problems/invalid-request", field: "limit"},
		{name: "events empty limit", method: "GET", path: "/v1/topics/orders/events?limit=", status: 400,
			typ: "/problems/invalid-request", field: "limit"},
		{name: "jobs empty since", method: "GET", path: "/v1/jobs?since", status: 400,
			typ: "/problems/invalid-request", field: "since"},
		{name: "dlq empty until", method: "GET", path: "/v1/dlq?until=", status: 400,
			typ: "/problems/invalid-request", field: "until"},
		{name: "jobs empty state", method: "GET", path: "/v1/jobs?state", status: 400,
			typ: "/problems/invalid-request", field: "state"},
		{name: "dlq empty resolved", method: "GET", path: "/v1/dlq?resolved=", status: 400,
			typ: "/problems/invalid-request", field: "resolved"},
		// A bad API key id named no field.
		{name: "revoke key NUL id", method: "DELETE", path: "/v1/apikeys/%00", key: e.admin, status: 400,
			typ: "/problems/invalid-request", field: "id"},
		{name: "get limit empty queue", method: "GET", path: "/v1/limits/tenant/a?queue=", key: e.admin,
			status: 400, typ: "/problems/invalid-request", field: "queue"},
	})
	r := e.req("GET", "/v1/limits/tenant/a", e.admin, nil)
	expect(t, r, 200, "")
	if c := r.json(t)["concurrency"]; c != float64(7) {
		t.Fatalf("the tenant-wide limit changed: %s", r.body)
	}
}

// TestDotSegmentsAreProblems: a bare "." or ".." path segment, or an empty
// one, was answered by the mux with a 307 redirect to the cleaned path (an
// HTML body, and another operation: POST …/lease/renew/.. went to the
// lease acquire); it is a 400 problem naming the path where the segment
// stands for a name, else a 404. An escaped %2E still addresses ".".
func TestDotSegmentsAreProblems(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/targets/.", 400},
		{"PUT", "/v1/schedules/..", 400},
		{"POST", "/v1/idempotency/k1/lease/renew/..", 404},
		{"GET", "/v1/topics//events", 400},
		{"DELETE", "/v1/limits/./x", 400},
		{"PUT", "/v1/targets/", 400},
		{"GET", "/v1/", 404},
	} {
		r := e.reqNoRedirect(c.method, c.path, e.keyA, map[string]any{"lease": "1m"})
		if c.status == 404 {
			expect(t, r, 404, "/problems/not-found")
			continue
		}
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs["path"] == nil {
			t.Fatalf("%s %s: %s names no path", c.method, c.path, r.body)
		}
	}
	expect(t, e.req("GET", "/v1/idempotency/k1", e.keyA, nil), 404, "/problems/not-found")
	expect(t, e.req("PUT", "/v1/schedules/%2E", e.keyA, map[string]any{"every": "1h", "kind": "k"}), 200, "")
	if r := e.req("GET", "/v1/schedules/%2E", e.keyA, nil); r.status != 200 || r.json(t)["name"] != "." {
		t.Fatalf("GET %%2E: %d %s", r.status, r.body)
	}
}

// TestHugeHeadersAreProblems: Idempotency-Key, Idem-Tenant and
// Content-Type of 63 KiB (under the server's 64 KiB header limit) are 4xx
// problems (but a long media type parameter) and write nothing.
func TestHugeHeadersAreProblems(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	huge := strings.Repeat("k", 63<<10)
	for _, h := range [][2]string{{"Idempotency-Key", huge}, {"Idem-Tenant", huge}, {"Content-Type", "application/json; x=" + huge}} {
		if h[0] == "Content-Type" {
			if n := e.countJobs(); n != 0 {
				t.Fatalf("%d jobs written", n)
			}
		}
		for _, c := range []struct{ method, path, key, body string }{
			{"POST", "/v1/jobs", e.admin, `{"kind":"k"}`},
			{"POST", "/v1/idempotency/k1/lease", e.admin, `{"lease":"1m"}`},
			{"PUT", "/v1/schedules/s1", e.admin, `{"every":"1h","kind":"k"}`},
		} {
			r := e.req(c.method, c.path, c.key, c.body, h[0], h[1])
			if (h[0] == "Content-Type" || h[0] == "Idempotency-Key" && c.method == "PUT") && r.status < 300 {
				continue // a long parameter is still application/json; a PUT takes no key
			}
			fuzzCheck(t, c.method+" "+c.path+" "+h[0], r)
			if r.status < 400 {
				t.Fatalf("%s %s with a huge %s: %d %s", c.method, c.path, h[0], r.status, r.body)
			}
		}
	}
}

// TestLeaseCompleteResultIsStrictJSON: a result lease's completion took a
// result a job's completion refuses (1e400, beyond the double range) and
// cached it for every later caller; it is a 400 naming result, and the
// lease is still held (a valid completion then works).
func TestLeaseCompleteResultIsStrictJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	a := e.req("POST", "/v1/idempotency/k1/lease", e.keyA, map[string]any{"lease": "1m"})
	expect(t, a, 200, "")
	tok := a.json(t)["lease_token"].(string)
	for _, res := range []string{`1e400`, `{"a":[-1e309]}`} {
		r := e.req("POST", "/v1/idempotency/k1/lease/complete", e.keyA, `{"lease_token":"`+tok+`","result":`+res+`}`)
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs["result"] == nil {
			t.Fatalf("result %s: %s names no result", res, r.body)
		}
	}
	r := e.req("POST", "/v1/idempotency/k1/lease/complete", e.keyA, `{"lease_token":"`+tok+`","result":{"ok":true}}`)
	expect(t, r, 200, "")
	if got, _ := r.json(t)["result"].(map[string]any); got["ok"] != true {
		t.Fatalf("stored %s", r.body)
	}
}
