package idemhttp_test

import "testing"

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
