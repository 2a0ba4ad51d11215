package idemhttp_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeEnqueue drives the request decoders of enqueue, batch, claim,
// replay, requeue and fail with arbitrary bodies: the answer is never a 5xx and
// a 4xx is always a problem.
func FuzzDecodeEnqueue(f *testing.F) {
	for _, s := range []string{`{"kind":"a"}`, `{"kind":"a","args":{"x":[1,2]},"run_at":"2030-01-01T00:00:00Z","dedup_window":"0s"}`,
		`{"jobs":[{"kind":"a"},{"kind":""}]}`, `{"queues":["q"],"worker_id":"w","wait":"0s"}`, `{"ids":["1","x"]}`,
		`{"filter":{"state":["dead"],"since":"2020-01-01T00:00:00Z"}}`, `{"kind":"a","depends_on":[1,"2"]}`, `nul`, `{"kind":"\u0000"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		e := fuzzEnv(t)
		for _, path := range []string{"/v1/jobs", "/v1/jobs/batch", "/v1/claim", "/v1/jobs/replay", "/v1/dlq/requeue", "/v1/jobs/1/fail"} {
			r := e.req("POST", path, e.keyA, body)
			if r.status >= 500 {
				t.Fatalf("%s %q: %d %s", path, body, r.status, r.body)
			}
			if r.status >= 400 && r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s %q: %d without a problem", path, body, r.status)
			}
		}
	})
}

// fuzzEnv gives each fuzz input a fresh server (a new SQLite file).
func fuzzEnv(t *testing.T) *env { return setup(t, openSQLite, nil) }

// FuzzListQuery drives the list queries (GET /v1/jobs and /v1/dlq) with
// arbitrary query strings: malformed escapes, NUL bytes, invalid UTF-8,
// unknown states, bad times and cursors are 4xx problems, never a 5xx, and
// a 200 is valid UTF-8 JSON.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"queue=%", "queue=%00", "kind=%FF", "partition_key=a%00b", "idempotency_key=%C3%28",
		"state=dead,running", "state=nope", "since=2020-01-01T00:00:00Z", "until=x", "limit=0", "limit=99999",
		"cursor=%%%", "cursor=ajE", "queue=q&kind=k&state=available&limit=2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		if _, err := url.Parse("/v1/jobs?" + query); err != nil || strings.ContainsAny(query, "#\x7f") || strings.IndexFunc(query, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
			t.Skip("not a request line a client can send")
		}
		e := fuzzEnv(t)
		for _, path := range []string{"/v1/jobs?", "/v1/dlq?"} {
			r := e.req("GET", path+query, e.keyA, nil)
			if r.status >= 500 {
				t.Fatalf("%s%q: %d %s", path, query, r.status, r.body)
			}
			if r.status >= 400 && r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s%q: %d without a problem", path, query, r.status)
			}
			if r.status == 200 && (!utf8.Valid(r.body) || !json.Valid(r.body)) {
				t.Fatalf("%s%q: a list that is not valid UTF-8 JSON", path, query)
			}
		}
	})
}

// FuzzClaim drives POST /v1/claim with arbitrary bodies: never a 5xx.
func FuzzClaim(f *testing.F) {
	for _, s := range []string{`{"queues":["q"],"worker_id":"w"}`, `{"queues":["q"],"kinds":["a\u0000"],"worker_id":"w"}`,
		"{\"queues\":[\"\xff\"],\"worker_id\":\"w\"}", `{"queues":["q"],"worker_id":"w","limit":1e400}`,
		`{"queues":["q"],"worker_id":"w","lease":"-1s","wait":"61s"}`, `{"queues":[],"worker_id":""}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		e := fuzzEnv(t)
		r := e.req("POST", "/v1/claim", e.keyA, body)
		if r.status >= 500 {
			t.Fatalf("claim %q: %d %s", body, r.status, r.body)
		}
		if r.status >= 400 && r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("claim %q: %d without a problem", body, r.status)
		}
	})
}
