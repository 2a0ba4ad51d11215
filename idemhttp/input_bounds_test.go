package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestNegativeDurationsRefused: integer seconds below -9223372036 once
// wrapped around in parseDuration (decode.go) to +292 years and passed the
// d < 0 check. Every duration field was affected, among them:
//   - fail with retry_after "-9223372037" reschedules the job to 2319;
//   - a result lease with lease "-9223372037" holds the key until 2319
//     (every other caller gets 409 until then);
//   - result_ttl / dedup_window are stored as 292 years.
//
// Each must be a 400 problem naming the field (as "-1" already is).
func TestNegativeDurationsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
	tok := e.claim(e.keyA, "q")["lease_token"].(string)
	for _, c := range []struct{ name, path, body string }{
		{"fail retry_after", "/v1/jobs/" + id + "/fail", `{"lease_token":"` + tok + `","retry_after":"-9223372037"}`},
		{"result lease", "/v1/idempotency/neg/lease", `{"lease":"-9223372037"}`},
		{"enqueue result_ttl", "/v1/jobs", `{"kind":"k","result_ttl":"-9223372037"}`},
		{"enqueue dedup_window", "/v1/jobs", `{"kind":"k","dedup_window":"-9223372037"}`},
		{"enqueue dedup_window min int64", "/v1/jobs", `{"kind":"k","dedup_window":"-9223372036854775808"}`},
	} {
		r := e.req("POST", c.path, e.keyA, c.body)
		if r.status != 400 {
			t.Errorf("%s: %s → %d, want 400: %.300s", c.name, c.body, r.status, r.body)
		}
	}
}

// TestUnstorableInputIsAProblemPostgres: inputs PostgreSQL refuses (values
// above its int4 columns, NUL bytes in text) reached it unvalidated and the
// refusal was a 500 (SQLite accepted them):
//   - a limit's rate N or concurrency above int4;
//   - a result-lease token with a NUL byte;
//   - a DLQ requeue filter error_code with a NUL byte;
//   - an API key id with a NUL byte in DELETE /v1/apikeys/{id}.
//
// Each must be a 4xx problem, on either store.
func TestUnstorableInputIsAProblemPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	testUnstorableInput(t, setup(t, openPostgres, nil))
}

// TestUnstorableInputIsAProblem is TestUnstorableInputIsAProblemPostgres
// on SQLite.
func TestUnstorableInputIsAProblem(t *testing.T) {
	t.Parallel()
	testUnstorableInput(t, setup(t, openSQLite, nil))
}

func testUnstorableInput(t *testing.T, e *env) {
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/limits/queue/q1", `{"rate":"9999999999999999/1ms"}`},
		{"PUT", "/v1/limits/queue/q2", `{"concurrency":9999999999999}`},
		{"POST", "/v1/idempotency/kk/lease/renew", `{"lease_token":"a\u0000b"}`},
		{"POST", "/v1/idempotency/kk/lease/complete", `{"lease_token":"a\u0000b"}`},
		{"POST", "/v1/idempotency/kk/lease/release", `{"lease_token":"a\u0000b"}`},
		{"POST", "/v1/dlq/requeue", `{"filter":{"error_code":"a\u0000"}}`},
		{"DELETE", "/v1/apikeys/a%00b", ``},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := e.req(c.method, c.path, e.admin, body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s %s %s → %d, want a 4xx problem: %s", c.method, c.path, c.body, r.status, strings.TrimSpace(string(r.body)))
		}
	}
}

// TestLeaseRenewAfterReleasePostgres: the HTTP result lease on
// PostgreSQL: a renew that arrives after its holder's release is 409
// lease-lost (it once took the key again, 200), and the next acquirer gets
// the key.
func TestLeaseRenewAfterReleasePostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	e := setup(t, openPostgres, nil)
	r := e.req("POST", "/v1/idempotency/rk/lease", e.keyA, `{}`)
	expect(t, r, 200, "")
	tok := r.json(t)["lease_token"].(string)
	r = e.req("POST", "/v1/idempotency/rk/lease/release", e.keyA, `{"lease_token":"`+tok+`"}`)
	expect(t, r, 204, "")
	renew := e.req("POST", "/v1/idempotency/rk/lease/renew", e.keyA, `{"lease_token":"`+tok+`"}`)
	next := e.req("POST", "/v1/idempotency/rk/lease", e.keyA, `{}`)
	if renew.status != 409 {
		t.Errorf("renew after release → %d, want 409 lease-lost: %s", renew.status, renew.body)
	}
	if next.status != 200 {
		t.Errorf("acquire after release → %d, want 200 with a lease: %s", next.status, next.body)
	}
}
