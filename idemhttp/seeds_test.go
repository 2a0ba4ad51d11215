package idemhttp_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
		"key charset":            testKeyCharset,
		"record failed":          testRecordFailedHTTP,
		"dedup window forever":   testDedupForever,
		"dead letters":           testDeadLetters,
		"dead letters bad input": testDeadLettersBadInput,
		"result lease":           testResultLease,
		"result lease race":      testResultLeaseRace,
		"batches":                testBatchesHTTP,
		"batches bad input":      testBatchesBadInput,
		"batches race":           testBatchesRace,
		"batch on_finish":        testBatchOnFinishHTTP,
		"batch on_finish bad":    testBatchOnFinishBadInput,
		"enqueue retry":          testEnqueueRetry,
		"enqueue retry bad":      testEnqueueRetryBadInput,
		"window 0 expires_at":    testWindowZeroExpiry,
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

// deadCoded makes a dead job in queue with error code code through a pull
// worker's fail and returns its id.
func (e *env) deadCoded(key, queue, code string) string {
	e.t.Helper()
	id := e.enqueue(key, map[string]any{"kind": "geo", "queue": queue})
	j := e.claim(key, queue)
	r := e.req("POST", "/v1/jobs/"+id+"/fail", key, map[string]any{"lease_token": j["lease_token"],
		"error": "upstream said no", "retry": false, "error_code": code})
	expect(e.t, r, 200, "")
	if m := r.json(e.t); m["state"] != "dead" || m["error_code"] != code {
		e.t.Fatalf("fail with a code: %s", r.body)
	}
	return id
}

func listed(t *testing.T, r *resp) []string {
	t.Helper()
	expect(t, r, 200, "")
	var out []string
	for _, j := range r.json(t)["jobs"].([]any) {
		out = append(out, j.(map[string]any)["id"].(string))
	}
	return out
}

func testDeadLetters(t *testing.T, open opener) {
	e := setup(t, open, nil)
	timeout := e.deadCoded(e.keyA, "geo", "GEO_TIMEOUT")
	bad := e.deadCoded(e.keyA, "geo", "BAD_INPUT")
	if got := listed(t, e.req("GET", "/v1/dlq?error_code=GEO_TIMEOUT", e.keyA, nil)); len(got) != 1 || got[0] != timeout {
		t.Fatalf("dlq by code: %v, want [%s]", got, timeout)
	}
	r := e.req("POST", "/v1/dlq/"+timeout+"/resolve", e.keyA, map[string]any{"note": "provider outage, reprocessed by hand"})
	expect(t, r, 200, "")
	j := r.json(t)
	if j["state"] != "dead" || j["resolution_note"] != "provider outage, reprocessed by hand" || j["resolved_at"] == nil {
		t.Fatalf("resolved job: %s", r.body)
	}
	t.Run("repeat keeps the first resolution", func(t *testing.T) {
		r := e.req("POST", "/v1/dlq/"+timeout+"/resolve", e.keyA, nil)
		expect(t, r, 200, "")
		if m := r.json(t); m["resolved_at"] != j["resolved_at"] || m["resolution_note"] != j["resolution_note"] {
			t.Fatalf("repeat: %s", r.body)
		}
	})
	if got := listed(t, e.req("GET", "/v1/dlq?resolved=false", e.keyA, nil)); len(got) != 1 || got[0] != bad {
		t.Fatalf("unresolved dlq: %v, want [%s]", got, bad)
	}
	if got := listed(t, e.req("GET", "/v1/dlq", e.keyA, nil)); len(got) != 2 {
		t.Fatalf("a resolved job left the dlq: %v", got)
	}
	r = e.req("GET", "/v1/stats", e.keyA, nil)
	expect(t, r, 200, "")
	q := r.json(t)["queues"].(map[string]any)["geo"].(map[string]any)
	if q["dead_unresolved"] != float64(1) || q["counts"].(map[string]any)["dead"] != float64(2) {
		t.Fatalf("stats: %v", q)
	}
	r = e.req("POST", "/v1/dlq/requeue", e.keyA, map[string]any{"filter": map[string]any{"error_code": "BAD_INPUT"}})
	expect(t, r, 200, "")
	if r.json(t)["requeued"] != float64(1) {
		t.Fatalf("requeue by code: %s", r.body)
	}
	if s := e.req("GET", "/v1/jobs/"+bad, e.keyA, nil).job(t)["state"]; s != "available" {
		t.Fatalf("requeued job is %v", s)
	}
}

func testDeadLettersBadInput(t *testing.T, open opener) {
	e := setup(t, open, nil)
	dead := e.deadCoded(e.keyA, "q", "E1")
	live := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "other"})
	r := e.req("POST", "/v1/dlq/"+live+"/resolve", e.keyA, map[string]any{"note": "x"})
	expect(t, r, 409, "/problems/wrong-state")
	r = e.req("POST", "/v1/dlq/999999/resolve", e.keyA, nil)
	expect(t, r, 404, "/problems/not-found")
	r = e.req("POST", "/v1/dlq/"+dead+"/resolve", e.keyB, nil)
	expect(t, r, 404, "/problems/not-found")
	r = e.req("POST", "/v1/dlq/"+dead+"/resolve", e.keyA, map[string]any{"note": strings.Repeat("n", 5000)})
	expect(t, r, 400, "/problems/invalid-request")
	r = e.req("GET", "/v1/dlq?resolved=maybe", e.keyA, nil)
	expect(t, r, 400, "/problems/invalid-request")
	for _, id := range []string{live, dead} {
		if j := e.req("GET", "/v1/jobs/"+id, e.keyA, nil).job(t); j["resolved_at"] != nil || j["resolution_note"] != nil {
			t.Fatalf("job %s written by a refused resolve: %v", id, j)
		}
	}
	t.Run("error code with a space", func(t *testing.T) {
		id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "codes"})
		j := e.claim(e.keyA, "codes")
		r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"],
			"error": "x", "error_code": "NOT VALID"})
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs["error_code"] == nil {
			t.Fatalf("problem does not name error_code: %s", r.body)
		}
		if s := e.req("GET", "/v1/jobs/"+id, e.keyA, nil).job(t)["state"]; s != "running" {
			t.Fatalf("job is %v after a refused fail, want running", s)
		}
	})
}

func testResultLease(t *testing.T, open opener) {
	e := setup(t, open, nil)
	base := "/v1/idempotency/" + url.PathEscape("geo job-7 sha256:ab")
	r := e.req("POST", base+"/lease", e.keyA, map[string]any{"lease": "30s", "result_ttl": "1h"})
	expect(t, r, 200, "")
	l := r.json(t)
	if l["acquired"] != true || l["cached"] != false || l["lease_token"] == "" {
		t.Fatalf("first acquire: %s", r.body)
	}
	token := l["lease_token"].(string)
	t.Run("held by the first", func(t *testing.T) {
		expect(t, e.req("POST", base+"/lease", e.keyA, nil), 409, "/problems/idempotency-key-in-progress")
	})
	t.Run("another tenant has its own key", func(t *testing.T) {
		r := e.req("POST", base+"/lease", e.keyB, nil)
		expect(t, r, 200, "")
		if r.json(t)["acquired"] != true {
			t.Fatalf("tenant b: %s", r.body)
		}
	})
	r = e.req("POST", base+"/lease/renew", e.keyA, map[string]any{"lease_token": token, "lease": "1m"})
	expect(t, r, 200, "")
	expect(t, e.req("POST", base+"/lease/complete", e.keyA, map[string]any{"lease_token": "not-mine", "result": 1}), 409, "/problems/lease-lost")
	r = e.req("POST", base+"/lease/complete", e.keyA, map[string]any{"lease_token": token,
		"result": map[string]any{"features_processed": 1200}, "duration_ms": 850})
	expect(t, r, 200, "")
	if m := r.json(t); m["cached"] != false || m["duration_ms"] != float64(850) || m["stored_at"] == nil {
		t.Fatalf("complete: %s", r.body)
	}
	r = e.req("POST", base+"/lease", e.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["acquired"] != false || m["cached"] != true || m["duration_ms"] != float64(850) ||
		m["result"].(map[string]any)["features_processed"] != float64(1200) {
		t.Fatalf("cached acquire: %s", r.body)
	}
	// Lease keys live in Do's namespace, apart from job keys: the records
	// API (job keys) does not see them.
	expect(t, e.req("GET", base, e.keyA, nil), 404, "/problems/not-found")
	// A job key's record shows the job's result with include=result.
	id := e.enqueue(e.keyA, map[string]any{"kind": "geo", "queue": "geo", "idempotency_key": "geo-job-8"})
	j := e.claim(e.keyA, "geo")
	expect(t, e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"],
		"result": map[string]any{"features_processed": 1200}}), 200, "")
	r = e.req("GET", "/v1/idempotency/geo-job-8?include=result", e.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["status"] != "completed" || m["result"].(map[string]any)["features_processed"] != float64(1200) {
		t.Fatalf("record with its result: %s", r.body)
	}
	if m := e.req("GET", "/v1/idempotency/geo-job-8", e.keyA, nil).json(t); m["result"] != nil {
		t.Fatalf("result shown without include: %v", m)
	}
	t.Run("release does not cache the failure", func(t *testing.T) {
		k := "/v1/idempotency/fails"
		tok := e.req("POST", k+"/lease", e.keyA, nil).json(t)["lease_token"].(string)
		expect(t, e.req("POST", k+"/lease/release", e.keyA, map[string]any{"lease_token": tok}), 204, "")
		r := e.req("POST", k+"/lease", e.keyA, nil)
		expect(t, r, 200, "")
		if r.json(t)["acquired"] != true {
			t.Fatalf("after a release: %s", r.body)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		expect(t, e.req("GET", base+"?include=everything", e.keyA, nil), 400, "/problems/invalid-request")
		expect(t, e.req("POST", "/v1/idempotency/"+strings.Repeat("k", 256)+"/lease", e.keyA, nil), 400, "/problems/invalid-request")
		expect(t, e.req("POST", "/v1/idempotency/"+url.PathEscape("a\x01")+"/lease", e.keyA, nil), 400, "/problems/invalid-request")
		expect(t, e.req("POST", base+"/lease", e.keyA, map[string]any{"lease": "0s"}), 400, "/problems/invalid-request")
		expect(t, e.req("POST", base+"/lease/complete", e.keyA, map[string]any{"lease_token": ""}), 400, "/problems/invalid-request")
		if _, err := e.client.RecordGet(t.Context(), "a", strings.Repeat("k", 256)); err == nil {
			t.Fatal("a refused key was written")
		}
	})
}

// testResultLeaseRace: many clients race for one key over HTTP; the work
// runs exactly once and every client ends with its result.
func testResultLeaseRace(t *testing.T, open opener) {
	e := setup(t, open, nil)
	const clients = 12
	var ran atomic.Int32
	var wg sync.WaitGroup
	results := make([]string, clients)
	path := "/v1/idempotency/race-key/lease"
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r := e.req("POST", path, e.keyA, nil)
				if r.status == 409 {
					continue // another client holds the lease: ask again
				}
				if r.status != 200 {
					t.Errorf("client %d: %d %s", i, r.status, r.body)
					return
				}
				m := r.json(t)
				if m["cached"] == true {
					results[i] = fmt.Sprint(m["result"])
					return
				}
				n := ran.Add(1)
				c := e.req("POST", "/v1/idempotency/race-key/lease/complete", e.keyA,
					map[string]any{"lease_token": m["lease_token"], "result": map[string]any{"run": n}})
				if c.status != 200 {
					t.Errorf("client %d complete: %d %s", i, c.status, c.body)
					return
				}
				results[i] = fmt.Sprint(c.json(t)["result"])
				return
			}
		}()
	}
	wg.Wait()
	if n := ran.Load(); n != 1 {
		t.Fatalf("the work ran %d times, want 1", n)
	}
	for i, r := range results {
		if r != "map[run:1]" {
			t.Fatalf("client %d got %q, want the one result", i, r)
		}
	}
}

func testBatchesHTTP(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := map[string]any{"metadata": map[string]any{"user": "u1"}, "jobs": []map[string]any{
		{"kind": "upload", "queue": "uploads", "args": map[string]any{"file": "a.csv"}},
		{"kind": "upload", "queue": "uploads", "args": map[string]any{"file": "b.csv"}},
		{"kind": "upload", "queue": "uploads", "args": map[string]any{"file": "c.csv"}, "idempotency_key": "row-3"},
	}}
	r := e.req("POST", "/v1/batches", e.keyA, body, "Idempotency-Key", "upload-42")
	expect(t, r, 201, "")
	m := r.json(t)
	b := m["batch"].(map[string]any)
	id := b["id"].(string)
	if m["existing"] != false || b["total"] != float64(3) || b["counts"].(map[string]any)["available"] != float64(3) ||
		b["key"] != "upload-42" || r.header.Get("Location") != "/v1/batches/"+id {
		t.Fatalf("create: %s", r.body)
	}
	jobs := b["jobs"].([]any)
	if k := jobs[2].(map[string]any)["idempotency_key"]; k != "upload-42/row-3" {
		t.Fatalf("own key of the third job: %v", k)
	}
	// A double click with the jobs in another order: the same batch.
	body["jobs"] = []map[string]any{body["jobs"].([]map[string]any)[1], body["jobs"].([]map[string]any)[0]}
	body["key"] = "upload-42"
	r = e.req("POST", "/v1/batches", e.keyA, body)
	expect(t, r, 200, "")
	if m := r.json(t); m["existing"] != true || m["batch"].(map[string]any)["id"] != id || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %s", r.body)
	}
	if n := e.countJobs(); n != 3 {
		t.Fatalf("%d jobs after a double click, want 3", n)
	}
	j := e.claim(e.keyA, "uploads")
	expect(t, e.req("POST", "/v1/jobs/"+j["id"].(string)+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"]}), 200, "")
	r = e.req("GET", "/v1/batches/"+id, e.keyA, nil)
	expect(t, r, 200, "")
	if c := r.json(t)["counts"].(map[string]any); c["completed"] != float64(1) || c["available"] != float64(2) {
		t.Fatalf("counts: %v", c)
	}
	r = e.req("POST", "/v1/batches/"+id+"/cancel", e.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["finished"] != true || m["counts"].(map[string]any)["cancelled"] != float64(2) {
		t.Fatalf("cancel: %s", r.body)
	}
	expect(t, e.req("GET", "/v1/batches/"+id, e.keyB, nil), 404, "/problems/not-found")
}

func testBatchesBadInput(t *testing.T, open opener) {
	e := setup(t, open, nil)
	one := []map[string]any{{"kind": "upload"}}
	for name, c := range map[string]struct {
		body  map[string]any
		field string
	}{
		"no key":       {map[string]any{"jobs": one}, "key"},
		"key too long": {map[string]any{"key": strings.Repeat("k", 256), "jobs": one}, "key"},
		"control char": {map[string]any{"key": "a\u0001b", "jobs": one}, "key"},
		"no jobs":      {map[string]any{"key": "b1", "jobs": []any{}}, "jobs"},
		"bad job":      {map[string]any{"key": "b1", "jobs": []map[string]any{{"kind": "ok"}, {"kind": ""}}}, "jobs[1].kind"},
		"bad job key":  {map[string]any{"key": "b1", "jobs": []map[string]any{{"kind": "k", "idempotency_key": "a\tb"}}}, "jobs[0].idempotency_key"},
		"bad metadata": {map[string]any{"key": "b1", "metadata": []int{1}, "jobs": one}, "metadata"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.req("POST", "/v1/batches", e.keyA, c.body)
			expect(t, r, 400, "/problems/invalid-request")
			if errs, _ := r.json(t)["errors"].(map[string]any); errs[c.field] == nil {
				t.Fatalf("problem does not name %s: %s", c.field, r.body)
			}
		})
	}
	r := e.req("POST", "/v1/batches", e.keyA, map[string]any{"key": "b2", "jobs": []map[string]any{{"kind": "k", "depends_on": []string{"999999"}}}})
	expect(t, r, 400, "/problems/invalid-request")
	expect(t, e.req("GET", "/v1/batches/999999", e.keyA, nil), 404, "/problems/not-found")
	expect(t, e.req("POST", "/v1/batches/999999/cancel", e.keyA, nil), 404, "/problems/not-found")
	if n := e.countJobs(); n != 0 {
		t.Fatalf("%d jobs written by refused batches", n)
	}
}

// testBatchesRace: 12 clients send the same batch at once (a burst of
// double clicks); exactly one creates it, nothing is created twice.
func testBatchesRace(t *testing.T, open opener) {
	e := setup(t, open, nil)
	const clients = 12
	body := map[string]any{"key": "burst", "jobs": []map[string]any{{"kind": "a"}, {"kind": "b"}, {"kind": "c"}}}
	var created atomic.Int32
	ids := make([]string, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.req("POST", "/v1/batches", e.keyA, body)
			if r.status != 201 && r.status != 200 {
				t.Errorf("client %d: %d %s", i, r.status, r.body)
				return
			}
			if r.status == 201 {
				created.Add(1)
			}
			ids[i] = r.json(t)["batch"].(map[string]any)["id"].(string)
		}()
	}
	wg.Wait()
	if n := created.Load(); n != 1 {
		t.Fatalf("%d clients created the batch, want 1", n)
	}
	for i, id := range ids {
		if id != ids[0] {
			t.Fatalf("client %d got batch %s, client 0 batch %s", i, id, ids[0])
		}
	}
	if n := e.countJobs(); n != 3 {
		t.Fatalf("%d jobs, want 3", n)
	}
}
