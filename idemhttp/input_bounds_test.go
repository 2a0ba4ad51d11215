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

// TestTimesOutsideFourDigitYearsRefused: a time with a zone offset whose
// UTC instant falls outside the years 0000–9999 parsed ("9999-12-31T23:59:59-10:00"
// is 10000-01-01 in UTC) and was stored, but JSON cannot render it: the
// enqueue answered 500 after creating the job, and the job answered 500 on
// every GET. Each must be a 400 naming the field, and nothing is written.
func TestTimesOutsideFourDigitYearsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	expect(t, e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil), 200, "")
	for _, at := range []string{"9999-12-31T23:59:59-10:00", "0000-01-01T00:00:00+10:00"} {
		for _, c := range []struct{ name, path, body string }{
			{"enqueue run_at", "/v1/jobs", `{"kind":"k","run_at":"` + at + `"}`},
			{"batch run_at", "/v1/batches", `{"key":"b-` + at + `","jobs":[{"kind":"k","run_at":"` + at + `"}]}`},
			{"retry run_at", "/v1/jobs/" + id + "/retry", `{"run_at":"` + at + `"}`},
		} {
			expect(t, e.req("POST", c.path, e.keyA, c.body), 400, "/problems/invalid-request")
		}
	}
	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs, want the one cancelled job", n)
	}
	if r := e.req("GET", "/v1/jobs/"+id, e.keyA, nil); r.status != 200 || r.job(t)["state"] != "cancelled" {
		t.Fatalf("job %d %s", r.status, r.body)
	}
}

// TestFieldNamesAreCaseSensitive: JSON names are case-sensitive and an
// unknown field is a 400 (API.md), but encoding/json matched "KIND" (or
// "\u212aind", with the Kelvin sign) to kind, so a misspelt body was
// accepted, and "Max_Attempts":0 passed the check that refuses an explicit
// max_attempts 0. Each must be a 400 naming the field; nothing is written.
func TestFieldNamesAreCaseSensitive(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, c := range []struct{ path, body, field string }{
		{"/v1/jobs", `{"KIND":"k"}`, "KIND"},
		{"/v1/jobs", `{"kind":"k","Max_Attempts":0}`, "Max_Attempts"},
		{"/v1/jobs", `{"\u212aind":"k"}`, "\u212aind"},
		{"/v1/jobs", `{"kind":"k","retry":{"Base":"1s"}}`, "Base"},
		{"/v1/batches", `{"key":"b1","jobs":[{"kind":"k","Queue":"q"}]}`, "Queue"},
		{"/v1/claim", `{"Queues":["q"],"worker_id":"w"}`, "Queues"},
		{"/v1/dlq/requeue", `{"filter":{"Queue":"q"}}`, "Queue"},
	} {
		r := e.req("POST", c.path, e.keyA, c.body)
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs[c.field] == nil {
			t.Errorf("%s %s: errors %v do not name %q", c.path, c.body, errs, c.field)
		}
	}
	r := e.req("POST", "/v1/jobs/batch", e.keyA, `{"jobs":[{"Kind":"k"}]}`)
	expect(t, r, 200, "")
	if !strings.Contains(string(r.body), `"errors":{"Kind":"unknown field"}`) {
		t.Errorf("batch item with Kind: %s", r.body)
	}
	if n := e.countJobs(); n != 0 {
		t.Fatalf("%d jobs written", n)
	}
	// Upper case in values, and in the names inside args, is data.
	expect(t, e.req("POST", "/v1/jobs", e.keyA, `{"kind":"K","queue":"Q","args":{"Name":"X","KIND":1}}`), 201, "")
}

// TestNumberOutOfRangeNamesTheProblem: a number an integer field cannot
// hold (too large, or not whole) is a 400 naming the field that says so;
// it read "must be a number, not number 1e30".
func TestNumberOutOfRangeNamesTheProblem(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, v := range []string{"1e30", "1.5", "99999999999999999999"} {
		r := e.req("POST", "/v1/jobs", e.admin, `{"kind":"k","priority":`+v+`}`)
		expect(t, r, 400, "/problems/invalid-request")
		detail, _ := r.json(t)["detail"].(string)
		if !strings.Contains(detail, "priority") || !strings.Contains(detail, "whole number") || strings.Contains(detail, "number "+v) {
			t.Errorf("priority %s: detail %q, want it to name priority and ask for a whole number", v, detail)
		}
	}
}
