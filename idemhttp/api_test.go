package idemhttp_test

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

func TestAPISQLite(t *testing.T) {
	t.Parallel()
	runAPISuite(t, openSQLite)
}

// runAPISuite is the whole API over real HTTP on one store backend.
func runAPISuite(t *testing.T, open opener) {
	tests := map[string]func(t *testing.T, open opener){
		"enqueue":             testEnqueue,
		"bad input":           testBadInput,
		"batch":               testBatch,
		"get and list":        testGetList,
		"cancel and retry":    testCancelRetry,
		"attempts":            testAttempts,
		"replay":              testReplay,
		"dlq":                 testDLQ,
		"pull workers":        testPull,
		"idempotency records": testRecords,
		"stats and ops":       testStatsOps,
		"auth":                testAuth,
		"tenant isolation":    testTenantIsolation,
		"post middleware":     testPostMiddleware,
		"concurrent enqueue":  testConcurrentEnqueue,
		"concurrent pulls":    testPullRace,
		"limits":              testLimits,
		"default limits":      testDefaultLimits,
		"pause":               testPause,
		"claim refill":        testClaimRefill,
		"schedules":           testSchedules,
		"schedule retry":      testScheduleRetry,
		"job timeout":         testJobTimeout,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}

func testEnqueue(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := map[string]any{"kind": "email", "args": map[string]any{"to": "a@x", "n": 1}, "queue": "mail"}
	r := e.req("POST", "/v1/jobs", e.keyA, body, "Idempotency-Key", "k1")
	expect(t, r, 201, "")
	job := r.job(t)
	if job["state"] != "available" || job["tenant"] != "a" || job["idempotency_key"] != "k1" || r.json(t)["existing"] != false {
		t.Fatalf("job %s", r.body)
	}
	id, ok := job["id"].(string)
	if !ok {
		t.Fatal("id is not a string")
	}
	t.Run("repeat replays", func(t *testing.T) {
		// Same fields, other key order and whitespace, key in the body this time.
		r := e.req("POST", "/v1/jobs", e.keyA, `{ "queue":"mail", "idempotency_key":"k1", "args":{"n":1,"to":"a@x"}, "kind":"email" }`)
		expect(t, r, 200, "")
		if r.header.Get("Idempotent-Replayed") != "true" || r.json(t)["existing"] != true || r.job(t)["id"] != id {
			t.Fatalf("replay %s %v", r.body, r.header)
		}
	})
	t.Run("different request 422", func(t *testing.T) {
		r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "email", "args": map[string]any{"to": "b@x"}, "queue": "mail"}, "Idempotency-Key", "k1")
		expect(t, r, 422, "/problems/idempotency-key-reused")
		if r.json(t)["job_id"] != id {
			t.Fatalf("422 without job id: %s", r.body)
		}
	})
	t.Run("header and body keys differ 400", func(t *testing.T) {
		r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "x", "idempotency_key": "k2"}, "Idempotency-Key", "k3")
		expect(t, r, 400, "/problems/invalid-request")
	})
	t.Run("dedup window 0s reopens after finish", func(t *testing.T) {
		b := map[string]any{"kind": "w0", "queue": "q0", "dedup_window": "0s", "result_ttl": "1h"}
		id1 := e.enqueue(e.keyA, withKey(b, "w0"))
		r := e.req("POST", "/v1/jobs", e.keyA, withKey(b, "w0"))
		expect(t, r, 200, "")
		j := e.claim(e.keyA, "q0")
		expect(t, e.req("POST", "/v1/jobs/"+id1+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"], "result": map[string]any{"ok": true}}), 200, "")
		r = e.req("POST", "/v1/jobs", e.keyA, withKey(b, "w0"))
		expect(t, r, 201, "")
		if r.job(t)["id"] == id1 {
			t.Fatal("no new job after the job finished with dedup_window 0s")
		}
	})
	t.Run("defaults", func(t *testing.T) {
		r := e.req("POST", "/v1/jobs", e.keyA, `{"kind":"plain"}`)
		expect(t, r, 201, "")
		j := r.job(t)
		if j["queue"] != "default" || j["max_attempts"] != float64(5) || fmt.Sprint(j["args"]) != "map[]" {
			t.Fatalf("defaults %s", r.body)
		}
		if r.header.Get("Location") != "/v1/jobs/"+j["id"].(string) {
			t.Fatalf("location %q", r.header.Get("Location"))
		}
	})
	t.Run("run_at future is scheduled", func(t *testing.T) {
		r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "later", "run_at": time.Now().Add(time.Hour).Format(time.RFC3339)})
		expect(t, r, 201, "")
		if r.job(t)["state"] != "scheduled" {
			t.Fatalf("state %s", r.body)
		}
	})
}

func withKey(b map[string]any, k string) map[string]any {
	out := map[string]any{"idempotency_key": k}
	for kk, v := range b {
		out[kk] = v
	}
	return out
}

func testBadInput(t *testing.T, open opener) {
	e := setup(t, open, nil)
	long := strings.Repeat("k", 256)
	cases := []struct {
		name, body string
		hdr        []string
		status     int
		typ        string
	}{
		{"malformed json", `{"kind":`, nil, 400, "/problems/malformed-json"},
		{"not an object", `[1,2]`, nil, 400, "/problems/invalid-request"},
		{"trailing data", `{"kind":"a"} {}`, nil, 400, "/problems/malformed-json"},
		{"unknown field", `{"kind":"a","colour":"red"}`, nil, 400, "/problems/invalid-request"},
		{"wrong type", `{"kind":"a","priority":"high"}`, nil, 400, "/problems/invalid-request"},
		{"kind wrong type", `{"kind":5}`, nil, 400, "/problems/invalid-request"},
		{"empty kind", `{"kind":""}`, nil, 400, "/problems/invalid-request"},
		{"missing kind", `{"queue":"q"}`, nil, 400, "/problems/invalid-request"},
		{"empty body", ``, nil, 400, "/problems/malformed-json"},
		{"bad duration", `{"kind":"a","dedup_window":"soon"}`, nil, 400, "/problems/invalid-request"},
		{"negative duration", `{"kind":"a","dedup_window":"-1s"}`, nil, 400, "/problems/invalid-request"},
		{"zero result ttl", `{"kind":"a","result_ttl":"0s"}`, nil, 400, "/problems/invalid-request"},
		{"duration as number", `{"kind":"a","result_ttl":30}`, nil, 400, "/problems/invalid-request"},
		{"bad time", `{"kind":"a","run_at":"tomorrow"}`, nil, 400, "/problems/invalid-request"},
		{"time without zone", `{"kind":"a","run_at":"2030-01-01T00:00:00"}`, nil, 400, "/problems/invalid-request"},
		{"args not json", `{"kind":"a","args":nope}`, nil, 400, "/problems/malformed-json"},
		{"metadata not object", `{"kind":"a","metadata":[1]}`, nil, 400, "/problems/invalid-request"},
		{"max attempts", `{"kind":"a","max_attempts":100000}`, nil, 400, "/problems/invalid-request"},
		{"negative max attempts", `{"kind":"a","max_attempts":-1}`, nil, 400, "/problems/invalid-request"},
		{"bad dependency id", `{"kind":"a","depends_on":["x1"]}`, nil, 400, "/problems/invalid-request"},
		{"long body key", `{"kind":"a","idempotency_key":"` + long + `"}`, nil, 400, "/problems/invalid-request"},
		{"long header key", `{"kind":"a"}`, []string{"Idempotency-Key", long}, 400, "/problems/invalid-request"},
		{"control char key", `{"kind":"a","idempotency_key":"a\u0001b"}`, nil, 400, "/problems/invalid-request"},
		{"long kind", `{"kind":"` + long + `"}`, nil, 400, "/problems/invalid-request"},
		{"bad queue", `{"kind":"a","queue":"has space"}`, nil, 400, "/problems/invalid-request"},
		{"text/plain", `{"kind":"a"}`, []string{"Content-Type", "text/plain"}, 415, "/problems/unsupported-media-type"},
		{"no content type", `{"kind":"a"}`, []string{"Content-Type", ""}, 415, "/problems/unsupported-media-type"},
		{"too large", `{"kind":"a","args":{"x":"` + strings.Repeat("x", 1<<20) + `"}}`, nil, 413, "/problems/payload-too-large"},
		{"unknown dependency", `{"kind":"a","depends_on":["999999"]}`, nil, 400, "/problems/invalid-request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.req("POST", "/v1/jobs", e.keyA, c.body, c.hdr...)
			expect(t, r, c.status, c.typ)
			if strings.Contains(string(r.body), "goroutine") {
				t.Fatal("stack trace in the reply")
			}
		})
	}
	if n := e.countJobs(); n != 0 {
		t.Fatalf("bad input wrote %d jobs", n)
	}
	// A body over the cap says which cap, and how to raise it.
	r := e.req("POST", "/v1/jobs", e.keyA, `{"kind":"a","args":"`+strings.Repeat("x", 1<<20)+`"}`)
	if d, _ := r.json(t)["detail"].(string); !strings.Contains(d, "1048576") || !strings.Contains(d, "http.max_body_bytes") {
		t.Errorf("413 detail %q does not name the cap (1048576 bytes, http.max_body_bytes)", d)
	}
	t.Run("list queries", func(t *testing.T) {
		for q, typ := range map[string]string{
			"state=sleeping": "/problems/invalid-request", "since=yesterday": "/problems/invalid-request",
			"until=2020-01-01": "/problems/invalid-request", "cursor=!!!": "/problems/invalid-request",
			"cursor=" + url.QueryEscape("bm90LWFuLWlk"): "/problems/invalid-request", "limit=-3": "/problems/invalid-request",
			"limit=ten": "/problems/invalid-request",
		} {
			expect(t, e.req("GET", "/v1/jobs?"+q, e.keyA, nil), 400, typ)
		}
		expect(t, e.req("GET", "/v1/dlq?state=available", e.keyA, nil), 400, "/problems/invalid-request")
	})
	t.Run("unknown ids", func(t *testing.T) {
		for _, p := range []string{"/v1/jobs/123456", "/v1/jobs/abc", "/v1/jobs/-1", "/v1/jobs/0", "/v1/jobs/007",
			"/v1/jobs/99999999999999999999", "/v1/jobs/1/attempts"} {
			expect(t, e.req("GET", p, e.keyA, nil), 404, "/problems/not-found")
		}
		expect(t, e.req("POST", "/v1/jobs/abc/cancel", e.keyA, nil), 404, "/problems/not-found")
		expect(t, e.req("DELETE", "/v1/dlq/abc", e.keyA, nil), 404, "/problems/not-found")
	})
	t.Run("routing problems", func(t *testing.T) {
		expect(t, e.req("GET", "/v1/nothing", e.keyA, nil), 404, "/problems/not-found")
		expect(t, e.req("PUT", "/v1/jobs", e.keyA, nil), 405, "/problems/method-not-allowed")
	})
	t.Run("claim", func(t *testing.T) {
		for _, b := range []string{`{"queues":[],"worker_id":"w"}`, `{"queues":["q"]}`, `{"queues":["q"],"worker_id":"w","wait":"2m"}`,
			`{"queues":["q"],"worker_id":"w","lease":"0s"}`, `{"queues":["q"],"worker_id":"w","limit":1000}`, `{"queues":"q","worker_id":"w"}`} {
			expect(t, e.req("POST", "/v1/claim", e.keyA, b), 400, "")
		}
	})
	t.Run("batch over 1000", func(t *testing.T) {
		jobs := make([]map[string]any, 1001)
		for i := range jobs {
			jobs[i] = map[string]any{"kind": "a"}
		}
		expect(t, e.req("POST", "/v1/jobs/batch", e.keyA, map[string]any{"jobs": jobs}), 400, "/problems/invalid-request")
	})
	if n := e.countJobs(); n != 0 {
		t.Fatalf("bad input wrote %d jobs", n)
	}
}

func testBatch(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := `{"jobs":[{"kind":"a","idempotency_key":"b1"},{"kind":""},{"kind":"c","bogus":1},{"kind":"d"}]}`
	r := e.req("POST", "/v1/jobs/batch", e.keyA, body)
	expect(t, r, 200, "")
	res := r.json(t)["results"].([]any)
	if len(res) != 4 {
		t.Fatalf("results %s", r.body)
	}
	first := res[0].(map[string]any)
	if first["job"] == nil || first["existing"] != false || res[1].(map[string]any)["error"] == nil ||
		res[2].(map[string]any)["error"] == nil || res[3].(map[string]any)["job"] == nil {
		t.Fatalf("results %s", r.body)
	}
	if e.countJobs() != 2 {
		t.Fatalf("jobs %d, want 2", e.countJobs())
	}
	r = e.req("POST", "/v1/jobs/batch", e.keyA, `{"jobs":[{"kind":"a","idempotency_key":"b1"},{"kind":"x","idempotency_key":"b1"}]}`)
	res = r.json(t)["results"].([]any)
	if res[0].(map[string]any)["existing"] != true || res[1].(map[string]any)["error"].(map[string]any)["status"] != float64(422) {
		t.Fatalf("repeat %s", r.body)
	}
	// A header key makes the whole batch retry-safe.
	for range 2 {
		r = e.req("POST", "/v1/jobs/batch", e.keyA, `{"jobs":[{"kind":"h"},{"kind":"h"}]}`, "Idempotency-Key", "batch-1")
		expect(t, r, 200, "")
	}
	if e.countJobs() != 4 {
		t.Fatalf("jobs %d, want 4", e.countJobs())
	}
	expect(t, e.req("POST", "/v1/jobs/batch", e.keyA, `{"jobs":[]}`), 400, "/problems/invalid-request")
}

func testGetList(t *testing.T, open opener) {
	e := setup(t, open, nil)
	var ids []string
	for i := range 7 {
		ids = append(ids, e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": fmt.Sprintf("q%d", i%2), "partition_key": "p"}))
	}
	r := e.req("GET", "/v1/jobs/"+ids[0], e.keyA, nil)
	expect(t, r, 200, "")
	if r.json(t)["id"] != ids[0] {
		t.Fatal(string(r.body))
	}
	// Pages of 3, newest first.
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		r := e.req("GET", "/v1/jobs?limit=3&cursor="+cursor, e.keyA, nil)
		expect(t, r, 200, "")
		m := r.json(t)
		for _, j := range m["jobs"].([]any) {
			seen = append(seen, j.(map[string]any)["id"].(string))
		}
		c, ok := m["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = url.QueryEscape(c)
	}
	if len(seen) != 7 || seen[0] != ids[6] || seen[6] != ids[0] {
		t.Fatalf("pages %v, ids %v", seen, ids)
	}
	r = e.req("GET", "/v1/jobs?queue=q1&state=available,running", e.keyA, nil)
	if n := len(r.json(t)["jobs"].([]any)); n != 3 {
		t.Fatalf("q1 jobs %d", n)
	}
	r = e.req("GET", "/v1/jobs?limit=100000", e.keyA, nil)
	expect(t, r, 200, "")
	r = e.req("GET", "/v1/jobs?state=dead", e.keyA, nil)
	if s := string(r.body); !strings.Contains(s, `"jobs":[]`) {
		t.Fatalf("empty list is not []: %s", s)
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	r = e.req("GET", "/v1/jobs?since="+since+"&partition_key=p&kind=k", e.keyA, nil)
	if n := len(r.json(t)["jobs"].([]any)); n != 7 {
		t.Fatalf("since: %d", n)
	}
}

func testCancelRetry(t *testing.T, open opener) {
	e := setup(t, open, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	r := e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil)
	expect(t, r, 200, "")
	if r.json(t)["state"] != "cancelled" {
		t.Fatal(string(r.body))
	}
	expect(t, e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil), 409, "/problems/wrong-state")
	r = e.req("POST", "/v1/jobs/"+id+"/retry", e.keyA, nil)
	expect(t, r, 200, "")
	if j := r.json(t); j["state"] != "available" || j["attempt"] != float64(0) {
		t.Fatal(string(r.body))
	}
	expect(t, e.req("POST", "/v1/jobs/"+id+"/retry", e.keyA, nil), 409, "/problems/wrong-state")
	expect(t, e.req("POST", "/v1/jobs/424242/retry", e.keyA, nil), 404, "/problems/not-found")
	expect(t, e.req("POST", "/v1/jobs/424242/cancel", e.keyA, nil), 404, "/problems/not-found")
	// Retry with a future run_at schedules the job.
	dead := e.dead(e.keyA, "dq")
	r = e.req("POST", "/v1/jobs/"+dead+"/retry", e.keyA, map[string]any{"run_at": time.Now().Add(time.Hour).Format(time.RFC3339)})
	expect(t, r, 200, "")
	if r.json(t)["state"] != "scheduled" {
		t.Fatal(string(r.body))
	}
	expect(t, e.req("POST", "/v1/jobs/"+dead+"/retry", e.keyA, `{"run_at":"soon"}`), 400, "/problems/invalid-request")
	// Cancelling a running job voids its lease.
	rid := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "run"})
	j := e.claim(e.keyA, "run")
	expect(t, e.req("POST", "/v1/jobs/"+rid+"/cancel", e.keyA, nil), 200, "")
	expect(t, e.req("POST", "/v1/jobs/"+rid+"/heartbeat", e.keyA, map[string]any{"lease_token": j["lease_token"]}), 409, "/problems/lease-lost")
}

func testAttempts(t *testing.T, open opener) {
	e := setup(t, open, nil)
	id := e.dead(e.keyA, "q")
	r := e.req("GET", "/v1/jobs/"+id+"/attempts", e.keyA, nil)
	expect(t, r, 200, "")
	atts := r.json(t)["attempts"].([]any)
	if len(atts) != 1 {
		t.Fatal(string(r.body))
	}
	a := atts[0].(map[string]any)
	if a["attempt"] != float64(1) || a["outcome"] != "dead" || a["error"] != "boom" || a["worker"] != "w1" {
		t.Fatalf("attempt %v", a)
	}
	fresh := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	r = e.req("GET", "/v1/jobs/"+fresh+"/attempts", e.keyA, nil)
	if !strings.Contains(string(r.body), `"attempts":[]`) {
		t.Fatal(string(r.body))
	}
}

func testReplay(t *testing.T, open opener) {
	e := setup(t, open, nil)
	a := e.enqueue(e.keyA, map[string]any{"kind": "rk", "queue": "r", "metadata": map[string]any{"m": 1}})
	b := e.enqueue(e.keyA, map[string]any{"kind": "rk", "queue": "r"})
	e.enqueue(e.keyA, map[string]any{"kind": "other", "queue": "r"})
	// Only finished jobs are replayed (TestReplaySkipsUnfinishedJobs).
	for _, id := range []string{a, b} {
		expect(t, e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil), 200, "")
	}
	r := e.req("POST", "/v1/jobs/replay", e.keyA, map[string]any{"filter": map[string]any{"kind": "rk"}, "queue": "copies"})
	expect(t, r, 200, "")
	if r.json(t)["enqueued"] != float64(2) {
		t.Fatal(string(r.body))
	}
	r = e.req("GET", "/v1/jobs?queue=copies", e.keyA, nil)
	jobs := r.json(t)["jobs"].([]any)
	if len(jobs) != 2 {
		t.Fatal(string(r.body))
	}
	oldest := jobs[1].(map[string]any)["metadata"].(map[string]any)
	if oldest["replay_of"] != a || oldest["m"] != float64(1) {
		t.Fatalf("metadata %v", oldest)
	}
	expect(t, e.req("POST", "/v1/jobs/replay", e.keyA, `{"filter":{"state":"nope"}}`), 400, "/problems/invalid-request")
	expect(t, e.req("POST", "/v1/jobs/replay", e.keyA, `{"filter":{"since":"x"}}`), 400, "/problems/invalid-request")
	// A replay sent with an Idempotency-Key names its copies by it, so a
	// retry after a 5xx (which the middleware does not store) finds the
	// copies the failed attempt made instead of copying those jobs again.
	r = e.req("POST", "/v1/jobs/replay", e.keyA, map[string]any{"filter": map[string]any{"kind": "rk", "queue": "r"}, "queue": "keyed"},
		"Idempotency-Key", "rp-1")
	expect(t, r, 200, "")
	r = e.req("GET", "/v1/jobs?queue=keyed", e.keyA, nil)
	for _, j := range r.json(t)["jobs"].([]any) {
		job := j.(map[string]any)
		orig, _ := strconv.ParseInt(job["metadata"].(map[string]any)["replay_of"].(string), 10, 64)
		if want := idem.ReplayCopyKey("rp-1", orig); job["idempotency_key"] != want {
			t.Fatalf("copy of %d has idempotency key %v, want %s", orig, job["idempotency_key"], want)
		}
	}
}

func testDLQ(t *testing.T, open opener) {
	e := setup(t, open, nil)
	d1, d2, d3 := e.dead(e.keyA, "q"), e.dead(e.keyA, "q"), e.dead(e.keyA, "z")
	live := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	r := e.req("GET", "/v1/dlq", e.keyA, nil)
	expect(t, r, 200, "")
	if n := len(r.json(t)["jobs"].([]any)); n != 3 {
		t.Fatalf("dlq %d", n)
	}
	r = e.req("POST", "/v1/dlq/requeue", e.keyA, map[string]any{"ids": []string{d1}})
	expect(t, r, 200, "")
	if r.json(t)["requeued"] != float64(1) {
		t.Fatal(string(r.body))
	}
	j := e.req("GET", "/v1/jobs/"+d1, e.keyA, nil).json(t)
	if j["state"] != "available" || j["attempt"] != float64(0) || j["max_attempts"] != float64(5) {
		t.Fatalf("requeued %v", j)
	}
	r = e.req("POST", "/v1/dlq/requeue", e.keyA, map[string]any{"filter": map[string]any{"queue": "z"}})
	if r.json(t)["requeued"] != float64(1) {
		t.Fatal(string(r.body))
	}
	expect(t, e.req("POST", "/v1/dlq/requeue", e.keyA, `{}`), 400, "/problems/invalid-request")
	expect(t, e.req("POST", "/v1/dlq/requeue", e.keyA, `{"ids":["1"],"filter":{}}`), 400, "/problems/invalid-request")
	expect(t, e.req("POST", "/v1/dlq/requeue", e.keyA, `{"ids":["77777"]}`), 404, "/problems/not-found")
	expect(t, e.req("DELETE", "/v1/dlq/"+live, e.keyA, nil), 404, "/problems/not-found")
	expect(t, e.req("DELETE", "/v1/dlq/"+d2, e.keyA, nil), 204, "")
	expect(t, e.req("GET", "/v1/jobs/"+d2, e.keyA, nil), 404, "/problems/not-found")
	// The requeue by filter (queue z) moved d3.
	if j := e.req("GET", "/v1/jobs/"+d3, e.keyA, nil).json(t); j["state"] != "available" {
		t.Fatalf("d3 after requeue by filter %v", j)
	}
}

func testPull(t *testing.T, open opener) {
	e := setup(t, open, nil)
	r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"p"}, "worker_id": "w"})
	expect(t, r, 200, "")
	if strings.TrimSpace(string(r.body)) != `{"jobs":[]}` {
		t.Fatalf("empty claim %s", r.body)
	}
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "p", "max_attempts": 3})
	j := e.claim(e.keyA, "p")
	tok := j["lease_token"].(string)
	if j["id"] != id || tok == "" || j["lease_expires_at"] == nil || j["attempt"] != float64(1) || j["state"] != "running" {
		t.Fatalf("claimed %v", j)
	}
	r = e.req("POST", "/v1/jobs/"+id+"/heartbeat", e.keyA, map[string]any{"lease_token": tok, "lease": "1m"})
	expect(t, r, 200, "")
	exp, err := time.Parse(time.RFC3339Nano, r.json(t)["lease_expires_at"].(string))
	if err != nil || time.Until(exp) < 50*time.Second {
		t.Fatalf("lease %s", r.body)
	}
	expect(t, e.req("POST", "/v1/jobs/"+id+"/heartbeat", e.keyA, map[string]any{"lease_token": "wrong"}), 409, "/problems/lease-lost")
	expect(t, e.req("POST", "/v1/jobs/"+id+"/heartbeat", e.keyA, map[string]any{}), 400, "/problems/invalid-request")
	// fail with retry_after 0s: retryable and claimable at once.
	r = e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": tok, "error": "transient", "retry_after": "0s"})
	expect(t, r, 200, "")
	if r.json(t)["state"] != "retryable" {
		t.Fatal(string(r.body))
	}
	expect(t, e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, map[string]any{"lease_token": tok}), 409, "/problems/lease-lost")
	j = e.claim(e.keyA, "p")
	tok = j["lease_token"].(string)
	if j["attempt"] != float64(2) {
		t.Fatalf("second claim %v", j)
	}
	done := map[string]any{"lease_token": tok, "result": map[string]any{"ok": 1}}
	r = e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, done)
	expect(t, r, 200, "")
	if m := r.json(t); m["state"] != "completed" || fmt.Sprint(m["result"]) != "map[ok:1]" {
		t.Fatal(string(r.body))
	}
	expect(t, e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, done), 200, "")
	expect(t, e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, map[string]any{"lease_token": tok, "result": 2}), 409, "/problems/lease-lost")
	t.Run("long poll wakes on enqueue", func(t *testing.T) {
		got := make(chan *resp, 1)
		go func() {
			got <- e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"lp"}, "worker_id": "w", "wait": "20s"})
		}()
		start := time.Now()
		// Enqueue until the claim returns (the first enqueue may beat the claim).
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "lp"})
		select {
		case r := <-got:
			if n := len(r.json(t)["jobs"].([]any)); n != 1 {
				t.Fatalf("long poll got %s", r.body)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("long poll did not return")
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("long poll took too long")
		}
	})
	t.Run("keyed job with cached result is not handed out", func(t *testing.T) {
		id1 := e.enqueue(e.keyA, map[string]any{"kind": "c", "queue": "cq", "idempotency_key": "res", "dedup_window": "0s"})
		j := e.claim(e.keyA, "cq")
		expect(t, e.req("POST", "/v1/jobs/"+id1+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"], "result": "R"}), 200, "")
		id2 := e.enqueue(e.keyA, map[string]any{"kind": "c", "queue": "cq", "idempotency_key": "res", "dedup_window": "0s"})
		r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"cq"}, "worker_id": "w"})
		if n := len(r.json(t)["jobs"].([]any)); n != 0 {
			t.Fatalf("cached job handed out: %s", r.body)
		}
		m := e.req("GET", "/v1/jobs/"+id2, e.keyA, nil).json(t)
		if m["state"] != "completed" || m["was_cached"] != true || m["original_job_id"] != id1 || m["result"] != "R" {
			t.Fatalf("cached job %v", m)
		}
	})
}

func testRecords(t *testing.T, open opener) {
	e := setup(t, open, nil)
	r := e.req("GET", "/v1/idempotency/"+url.PathEscape("rec/1\tx"), e.keyA, nil)
	expect(t, r, 400, "/problems/invalid-request") // control characters are not allowed in keys
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "idempotency_key": "rec/1", "queue": "q"})
	r = e.req("GET", "/v1/idempotency/"+url.PathEscape("rec/1"), e.keyA, nil)
	expect(t, r, 200, "")
	m := r.json(t)
	if m["key"] != "rec/1" || m["status"] != "in_progress" || m["job_id"] != id || m["created_at"] == nil {
		t.Fatalf("record %s", r.body)
	}
	if _, ok := m["dedup_until"]; !ok {
		t.Fatal("dedup_until missing")
	}
	r = e.req("GET", "/v1/idempotency", e.keyA, nil)
	expect(t, r, 200, "")
	st := r.json(t)
	for _, k := range []string{"entries", "in_progress", "expiring_24h", "expired", "size_bytes", "hits", "misses", "hit_rate"} {
		if _, ok := st[k]; !ok {
			t.Fatalf("stats without %s: %s", k, r.body)
		}
	}
	expect(t, e.req("DELETE", "/v1/idempotency/"+url.PathEscape("rec/1"), e.keyA, nil), 204, "")
	expect(t, e.req("GET", "/v1/idempotency/"+url.PathEscape("rec/1"), e.keyA, nil), 404, "/problems/not-found")
	expect(t, e.req("DELETE", "/v1/idempotency/nope", e.keyA, nil), 404, "/problems/not-found")
	// The key may be used again: a new job.
	r = e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "idempotency_key": "rec/1", "queue": "q"})
	expect(t, r, 201, "")
}

func testStatsOps(t *testing.T, open opener) {
	e := setup(t, open, &setupOpts{serverCfg: nil})
	e.dead(e.keyA, "s")
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "s"})
	r := e.req("GET", "/v1/stats", e.keyA, nil)
	expect(t, r, 200, "")
	q := r.json(t)["queues"].(map[string]any)["s"].(map[string]any)
	counts := q["counts"].(map[string]any)
	if counts["available"] != float64(1) || counts["dead"] != float64(1) || counts["running"] != float64(0) {
		t.Fatalf("stats %s", r.body)
	}
	for _, k := range []string{"oldest_available_age_s", "completed_1m", "failed_1m", "success_rate", "wait_ms", "run_ms"} {
		if _, ok := q[k]; !ok {
			t.Fatalf("stats without %s", k)
		}
	}
	expect(t, e.req("GET", "/healthz", "", nil), 200, "")
	r = e.req("GET", "/readyz", "", nil)
	if r.status != 200 || r.json(t)["status"] == "unhealthy" {
		t.Fatalf("readyz %d %s", r.status, r.body)
	}
	r = e.req("GET", "/metrics", "", nil)
	expect(t, r, 200, "")
	if !strings.Contains(string(r.body), `idem_jobs{queue="s",state="dead"} 1`) || !strings.Contains(string(r.body), "idem_http_requests_total") {
		t.Fatalf("metrics:\n%s", r.body)
	}
	r = e.req("GET", "/v1/openapi.json", e.keyA, nil)
	expect(t, r, 200, "")
	if r.json(t)["openapi"] != "3.1.0" {
		t.Fatal("openapi")
	}
}

func testAuth(t *testing.T, open opener) {
	e := setup(t, open, nil)
	for _, rt := range e.server.Routes() {
		method, path, _ := strings.Cut(rt, " ")
		path = strings.NewReplacer("{id}", "1", "{key}", "k").Replace(path)
		for _, key := range []string{"", "idem_unknown"} {
			r := e.req(method, path, key, nil)
			open := path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/v1/openapi.json"
			if open && r.status == 401 || !open && r.status != 401 {
				t.Fatalf("%s with key %q: %d", rt, key, r.status)
			}
			if !open {
				expect(t, r, 401, "/problems/unauthorized")
			}
		}
	}
	expect(t, e.req("GET", "/v1/jobs", "", nil, "Authorization", "Basic abc"), 401, "/problems/unauthorized")
	// A revoked key stops working (the auth cache is short).
	secret := e.newKey("c", false)
	expect(t, e.req("GET", "/v1/jobs", secret, nil), 200, "")
	keys, _ := e.st.APIKeyList(t.Context())
	for _, k := range keys {
		if k.Tenant == "c" {
			if err := e.st.APIKeyRevoke(t.Context(), &store.APIKeyRevokeParams{ID: k.ID, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.req("GET", "/v1/jobs", secret, nil).status != 401 {
		if time.Now().After(deadline) {
			t.Fatal("revoked key still accepted")
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline for the cache to expire
	}
	// A tenant key cannot act for another tenant.
	expect(t, e.req("GET", "/v1/jobs", e.keyA, nil, "Idem-Tenant", "b"), 403, "/problems/forbidden")
	expect(t, e.req("GET", "/v1/jobs", e.keyA, nil, "Idem-Tenant", "a"), 200, "")
}

func testTenantIsolation(t *testing.T, open opener) {
	e := setup(t, open, nil)
	ja := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "iso", "idempotency_key": "secret-key"})
	deadA := e.dead(e.keyA, "isodead")
	// b cannot see, list, cancel, retry, requeue, delete, claim or read records of a.
	expect(t, e.req("GET", "/v1/jobs/"+ja, e.keyB, nil), 404, "/problems/not-found")
	expect(t, e.req("GET", "/v1/jobs/"+ja+"/attempts", e.keyB, nil), 404, "/problems/not-found")
	expect(t, e.req("POST", "/v1/jobs/"+ja+"/cancel", e.keyB, nil), 404, "/problems/not-found")
	expect(t, e.req("POST", "/v1/jobs/"+deadA+"/retry", e.keyB, nil), 404, "/problems/not-found")
	expect(t, e.req("POST", "/v1/dlq/requeue", e.keyB, map[string]any{"ids": []string{deadA}}), 404, "/problems/not-found")
	r := e.req("POST", "/v1/dlq/requeue", e.keyB, map[string]any{"filter": map[string]any{}})
	if r.json(t)["requeued"] != float64(0) {
		t.Fatalf("b requeued a's jobs: %s", r.body)
	}
	expect(t, e.req("DELETE", "/v1/dlq/"+deadA, e.keyB, nil), 404, "/problems/not-found")
	for _, p := range []string{"/v1/jobs", "/v1/dlq"} {
		if n := len(e.req("GET", p, e.keyB, nil).json(t)["jobs"].([]any)); n != 0 {
			t.Fatalf("b lists %d of a's jobs at %s", n, p)
		}
	}
	r = e.req("POST", "/v1/claim", e.keyB, map[string]any{"queues": []string{"iso"}, "worker_id": "w"})
	if n := len(r.json(t)["jobs"].([]any)); n != 0 {
		t.Fatalf("b claimed a's job: %s", r.body)
	}
	expect(t, e.req("GET", "/v1/idempotency/secret-key", e.keyB, nil), 404, "/problems/not-found")
	expect(t, e.req("DELETE", "/v1/idempotency/secret-key", e.keyB, nil), 404, "/problems/not-found")
	if e.req("GET", "/v1/idempotency", e.keyB, nil).json(t)["entries"] != float64(0) {
		t.Fatal("b sees a's records in stats")
	}
	if len(e.req("GET", "/v1/stats", e.keyB, nil).json(t)["queues"].(map[string]any)) != 0 {
		t.Fatal("b sees a's queues")
	}
	// Same key in b is another record: a new job.
	rb := e.req("POST", "/v1/jobs", e.keyB, map[string]any{"kind": "other", "idempotency_key": "secret-key"})
	expect(t, rb, 201, "")
	// Pull operations on a's job with b's key: 404.
	j := e.claim(e.keyA, "iso")
	for _, op := range []string{"heartbeat", "complete", "fail"} {
		expect(t, e.req("POST", "/v1/jobs/"+ja+"/"+op, e.keyB, map[string]any{"lease_token": j["lease_token"]}), 404, "/problems/not-found")
	}
	// The admin acts in default, or in a tenant named by Idem-Tenant.
	expect(t, e.req("GET", "/v1/jobs/"+ja, e.admin, nil), 404, "/problems/not-found")
	r = e.req("GET", "/v1/jobs/"+ja, e.admin, nil, "Idem-Tenant", "a")
	expect(t, r, 200, "")
	expect(t, e.req("GET", "/v1/idempotency/secret-key", e.admin, nil, "Idem-Tenant", "a"), 200, "")
	r = e.req("POST", "/v1/jobs", e.admin, map[string]any{"kind": "k"}, "Idem-Tenant", "b")
	if r.job(t)["tenant"] != "b" {
		t.Fatal(string(r.body))
	}
	expect(t, e.req("GET", "/v1/jobs", e.admin, nil, "Idem-Tenant", "bad tenant"), 400, "/problems/invalid-request")
}

func testPostMiddleware(t *testing.T, open opener) {
	e := setup(t, open, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	r1 := e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil, "Idempotency-Key", "c1")
	expect(t, r1, 200, "")
	r2 := e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil, "Idempotency-Key", "c1")
	expect(t, r2, 200, "") // without the key this would be 409
	if r2.header.Get("Idempotent-Replayed") != "true" || string(r1.body) != string(r2.body) {
		t.Fatalf("replay %v %s", r2.header, r2.body)
	}
	other := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	expect(t, e.req("POST", "/v1/jobs/"+other+"/cancel", e.keyA, nil, "Idempotency-Key", "c1"), 422, "/problems/idempotency-key-reused")
	// Keys are per tenant: b's c1 is its own.
	expect(t, e.req("POST", "/v1/jobs/"+other+"/cancel", e.keyB, nil, "Idempotency-Key", "c1"), 404, "/problems/not-found")
	// A 4xx is stored too (policy: status < 500).
	expect(t, e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil, "Idempotency-Key", "c2"), 409, "/problems/wrong-state")
	r := e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil, "Idempotency-Key", "c2")
	expect(t, r, 409, "")
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("409 not replayed")
	}
}

// testConcurrentEnqueue: 100 identical POSTs with one key → one job.
func testConcurrentEnqueue(t *testing.T, open opener) {
	e := setup(t, open, nil)
	const n = 100
	var wg sync.WaitGroup
	results := make([]*resp, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = e.req("POST", "/v1/jobs", e.keyA, `{"kind":"once","args":{"x":1}}`, "Idempotency-Key", "same")
		}()
	}
	close(start)
	wg.Wait()
	created, replayed := 0, 0
	var id string
	for _, r := range results {
		switch r.status {
		case 201:
			created++
		case 200:
			if r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("200 without Idempotent-Replayed")
			}
			replayed++
		default:
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		got := r.job(t)["id"].(string)
		if id == "" {
			id = got
		}
		if got != id {
			t.Fatalf("two jobs: %s and %s", id, got)
		}
	}
	if created != 1 || replayed != n-1 || e.countJobs() != 1 {
		t.Fatalf("created %d replayed %d jobs %d", created, replayed, e.countJobs())
	}
}
