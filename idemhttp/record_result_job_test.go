package idemhttp_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestRecordResultJob (both stores): after a later job with the same key
// is served from the cached result, the record names the later job in
// job_id and the job whose run produced the result in result_job_id.
func TestRecordResultJob(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "postgres" {
				dbtest.PostgresURL(t) // skips loudly without a server
			}
			testRecordResultJob(t, open)
		})
	}
}

func testRecordResultJob(t *testing.T, open opener) {
	e := setup(t, open, nil)
	job := map[string]any{"kind": "k", "queue": "rj", "idempotency_key": "rj", "dedup_window": "0s", "result_ttl": "1h"}
	first := e.enqueue(e.keyA, job)
	r := e.req("GET", "/v1/idempotency/rj", e.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["job_id"] != first || m["result_job_id"] != nil {
		t.Fatalf("record before a result: %s; want job_id %s and no result_job_id", r.body, first)
	}
	j := e.claim(e.keyA, "rj")
	expect(t, e.req("POST", "/v1/jobs/"+first+"/complete", e.keyA,
		map[string]any{"lease_token": j["lease_token"], "result": map[string]any{"v": 1}}), 200, "")
	r = e.req("GET", "/v1/idempotency/rj", e.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["job_id"] != first || m["result_job_id"] != first {
		t.Fatalf("record after the first run: %s; want job_id and result_job_id %s", r.body, first)
	}

	// The dedup window is closed: the same key makes a new job, which the
	// claim completes from the cached result without handing it out.
	r = e.req("POST", "/v1/jobs", e.keyA, job)
	expect(t, r, 201, "")
	second := r.job(t)["id"].(string)
	if second == first {
		t.Fatalf("the repeat is job %s again; want a new job", first)
	}
	r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"rj"}, "worker_id": "w1"})
	expect(t, r, 200, "")
	if jobs := r.json(t)["jobs"].([]any); len(jobs) != 0 {
		t.Fatalf("claim handed out %s; want the cached job settled", r.body)
	}
	if s := e.req("GET", "/v1/jobs/"+second, e.keyA, nil).json(t)["state"]; s != "completed" {
		t.Fatalf("second job %v, want completed from the cache", s)
	}
	r = e.req("GET", "/v1/idempotency/rj", e.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["status"] != "completed" || m["job_id"] != second || m["result_job_id"] != first {
		t.Fatalf("record after the cache hit: %s; want job_id %s (the latest job), result_job_id %s (its run made the result)",
			r.body, second, first)
	}
}
