package idemhttp_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
)

// The seed-fidelity behaviours of the API (issue 12), on both stores.

func TestSeedsSQLite(t *testing.T) {
	t.Parallel()
	runSeedSuite(t, openSQLite)
}

func TestSeedsPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	runSeedSuite(t, openPostgres)
}

func runSeedSuite(t *testing.T, open opener) {
	tests := map[string]func(t *testing.T, open opener){
		"key charset":          testKeyCharset,
		"record failed":        testRecordFailedHTTP,
		"dedup window forever": testDedupForever,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}

func testKeyCharset(t *testing.T, open opener) {
	e := setup(t, open, nil)
	t.Run("space is printable", func(t *testing.T) {
		r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "idempotency_key": "order 1234"})
		expect(t, r, 201, "")
		r = e.req("GET", "/v1/idempotency/"+url.PathEscape("order 1234"), e.keyA, nil)
		expect(t, r, 200, "")
		if m := r.json(t); m["key"] != "order 1234" || m["status"] != "in_progress" {
			t.Fatalf("record %s", r.body)
		}
	})
	before := e.countJobs()
	for name, k := range map[string]string{
		"256 characters":    strings.Repeat("k", 256),
		"control character": "a\x01b",
		"tab":               "a\tb",
		"DEL":               "a\x7fb",
		"non-ASCII":         "clé",
	} {
		t.Run(name+" rejected", func(t *testing.T) {
			r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "idempotency_key": k})
			expect(t, r, 400, "/problems/invalid-request")
			if errs, _ := r.json(t)["errors"].(map[string]any); errs["idempotency_key"] == nil {
				t.Fatalf("problem does not name idempotency_key: %s", r.body)
			}
		})
	}
	if n := e.countJobs(); n != before {
		t.Fatalf("%d jobs after bad keys, want %d", n, before)
	}
}

func testRecordFailedHTTP(t *testing.T, open opener) {
	e := setup(t, open, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q", "idempotency_key": "doomed"})
	j := e.claim(e.keyA, "q")
	r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"], "error": "boom", "retry": false})
	expect(t, r, 200, "")
	r = e.req("GET", "/v1/idempotency/doomed", e.keyA, nil)
	expect(t, r, 200, "")
	rec := r.json(t)
	if rec["status"] != "failed" || rec["job_id"] != id {
		t.Fatalf("record of a dead job: %s", r.body)
	}
	for _, f := range []string{"created_at", "dedup_until", "expires_at"} {
		if s, ok := rec[f].(string); !ok || s == "" {
			t.Errorf("%s = %#v, want a time", f, rec[f])
		}
	}
	if _, ok := rec["completed_at"]; ok {
		t.Errorf("completed_at present on a failed record: %s", r.body)
	}
	r = e.req("GET", "/v1/idempotency", e.keyA, nil)
	expect(t, r, 200, "")
	if st := r.json(t); st["failed"] != float64(1) || st["in_progress"] != float64(0) || st["completed"] != float64(0) {
		t.Fatalf("stats: %s", r.body)
	}
}

func testDedupForever(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := map[string]any{"kind": "upload", "idempotency_key": "file-1", "dedup_window": "forever"}
	r := e.req("POST", "/v1/jobs", e.keyA, body)
	expect(t, r, 201, "")
	r = e.req("GET", "/v1/idempotency/file-1", e.keyA, nil)
	expect(t, r, 200, "")
	until, err := time.Parse(time.RFC3339Nano, r.json(t)["dedup_until"].(string))
	if err != nil || until.Before(time.Now().AddDate(99, 0, 0)) {
		t.Fatalf("dedup_until of a forever window: %s (%v)", r.body, err)
	}
	r = e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "dedup_window": "for ever"})
	expect(t, r, 400, "/problems/invalid-request")
}
