package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

// The seeds' own scenarios end to end over HTTP, on both stores: each walks
// one seed's concrete story with its defaults (docs/recipes shows them in
// Go on SQLite).

func TestSeedScenariosSQLite(t *testing.T) {
	t.Parallel()
	runSeedScenarios(t, openSQLite)
}

func TestSeedScenariosPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	runSeedScenarios(t, openPostgres)
}

func runSeedScenarios(t *testing.T, open opener) {
	tests := map[string]func(t *testing.T, open opener){
		"000 duplicate job served from the cache": testSeed000CacheAcrossJobs,
		"000 per-process TTL and cache stats":     testSeed000TTLAndStats,
		"000 record shows the run's duration":     testSeed000RecordDuration,
		"004 long-running job among many":         testSeed004LongRunningAmongMany,
		"002 throttling per tenant and queue":     testSeed002Throttling,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}

// claimNone fails unless a claim of queue hands out nothing.
func (e *env) claimNone(key, queue string) {
	e.t.Helper()
	r := e.req("POST", "/v1/claim", key, map[string]any{"queues": []string{queue}, "worker_id": "w1", "lease": "30s"})
	expect(e.t, r, 200, "")
	if jobs := r.json(e.t)["jobs"].([]any); len(jobs) != 0 {
		e.t.Fatalf("claimed %d jobs, want none: %s", len(jobs), r.body)
	}
}

// complete completes claimed job j with result.
func (e *env) complete(key string, j map[string]any, result any) map[string]any {
	e.t.Helper()
	r := e.req("POST", "/v1/jobs/"+j["id"].(string)+"/complete", key, map[string]any{"lease_token": j["lease_token"], "result": result})
	expect(e.t, r, 200, "")
	return r.json(e.t)
}

// testSeed000CacheAcrossJobs is seed 000's scenario 2 and 3: job
// job-20251114-xyz789 with the inputs of job-20251114-abc123, which
// completed, is served the cached result (was_cached, original_job_id) and
// never handed to a worker; a failed run is not cached, so a later job with
// its key runs.
func testSeed000CacheAcrossJobs(t *testing.T, open opener) {
	e := setup(t, open, nil)
	buffer := map[string]any{"kind": "buffer", "queue": "geo", "idempotency_key": "geo_3a7f4c2b", "dedup_window": "0s",
		"args": map[string]any{"layer": "parcels", "distance_m": 50}}
	first := e.enqueue(e.keyA, buffer)
	j := e.claim(e.keyA, "geo")
	if j["id"] != first {
		t.Fatalf("claimed %v, want %s", j["id"], first)
	}
	e.complete(e.keyA, j, map[string]any{"features_processed": 1200})

	// The worker crashed before its caller saw the answer: the same job is
	// submitted again (window 0: a new job) and completes from the cache.
	r := e.req("POST", "/v1/jobs", e.keyA, buffer)
	expect(t, r, 201, "")
	second := r.job(t)["id"].(string)
	if second == first {
		t.Fatalf("window 0 after the first finished: same job %s", first)
	}
	e.claimNone(e.keyA, "geo")
	got := e.req("GET", "/v1/jobs/"+second, e.keyA, nil).job(t)
	res, _ := json.Marshal(got["result"])
	if got["state"] != "completed" || got["was_cached"] != true || got["original_job_id"] != first ||
		string(res) != `{"features_processed":1200}` {
		t.Fatalf("second job: %v", got)
	}
	r = e.req("GET", "/v1/idempotency/geo_3a7f4c2b?include=result", e.keyA, nil)
	expect(t, r, 200, "")
	rec := r.json(t)
	res, _ = json.Marshal(rec["result"])
	if rec["status"] != "completed" || string(res) != `{"features_processed":1200}` {
		t.Fatalf("record: %s", r.body)
	}

	// Scenario 3: a failure is not cached.
	failing := map[string]any{"kind": "buffer", "queue": "geo", "idempotency_key": "geo_bad_geometry", "dedup_window": "0s",
		"max_attempts": 1, "args": map[string]any{"layer": "broken"}}
	bad := e.enqueue(e.keyA, failing)
	j = e.claim(e.keyA, "geo")
	r = e.req("POST", "/v1/jobs/"+bad+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"], "error": "bad geometry"})
	expect(t, r, 200, "")
	if s := r.json(t)["state"]; s != "dead" {
		t.Fatalf("failed run: state %v", s)
	}
	r = e.req("POST", "/v1/jobs", e.keyA, failing)
	expect(t, r, 201, "")
	again := r.job(t)["id"].(string)
	if j := e.claim(e.keyA, "geo"); j["id"] != again || j["was_cached"] == true {
		t.Fatalf("after a failure the job with its key was not run: %v", j)
	}
}

// testSeed000TTLAndStats: a per-process TTL (seed 000's future item 1, here
// 24 h for "buffer" while other kinds keep the 7-day default) and the
// cache statistics of seed 000's GetStatisticsAsync: total entries,
// expiring in 24 h, expired entries awaiting cleanup, size.
func testSeed000TTLAndStats(t *testing.T, open opener) {
	clock := &shiftClock{}
	ccfg := clock.clientCfg()
	ccfg.ResultTTLByKind = map[string]time.Duration{"buffer": 24 * time.Hour}
	e := setup(t, open, &setupOpts{clientCfg: ccfg, serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	run := func(kind, key string) time.Time {
		t.Helper()
		// Window 0: the record lives for the result TTL alone (a window
		// longer than the TTL keeps the record, result included, that long).
		e.enqueue(e.keyA, map[string]any{"kind": kind, "queue": "geo", "idempotency_key": key, "dedup_window": "0s"})
		fin := e.complete(e.keyA, e.claim(e.keyA, "geo"), map[string]any{"kind": kind})
		at, err := time.Parse(time.RFC3339Nano, fin["finished_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	expires := func(key string) time.Time {
		t.Helper()
		r := e.req("GET", "/v1/idempotency/"+key, e.keyA, nil)
		expect(t, r, 200, "")
		at, err := time.Parse(time.RFC3339Nano, r.json(t)["expires_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	bufDone := run("buffer", "geo_buffer_1")
	isecDone := run("intersection", "geo_intersection_1")
	if got := expires("geo_buffer_1"); !got.Equal(bufDone.Add(24 * time.Hour)) {
		t.Fatalf("buffer result expires %s, want %s (24 h TTL of its kind)", got, bufDone.Add(24*time.Hour))
	}
	if got := expires("geo_intersection_1"); !got.Equal(isecDone.Add(idem.DefaultResultTTL)) {
		t.Fatalf("intersection result expires %s, want %s (the 7-day default)", got, isecDone.Add(idem.DefaultResultTTL))
	}
	stats := func() map[string]any {
		t.Helper()
		r := e.req("GET", "/v1/idempotency", e.keyA, nil)
		expect(t, r, 200, "")
		return r.json(t)
	}
	st := stats()
	if st["entries"] != float64(2) || st["expiring_24h"] != float64(1) || st["expired"] != float64(0) ||
		st["size_bytes"].(float64) <= 0 {
		t.Fatalf("stats after two runs: %v", st)
	}
	clock.shift(25 * time.Hour) // no cleanup ran: the buffer result awaits it
	st = stats()
	if st["entries"] != float64(1) || st["expiring_24h"] != float64(0) || st["expired"] != float64(1) {
		t.Fatalf("stats 25 h later: %v", st)
	}
	expect(t, e.req("GET", "/v1/idempotency/geo_buffer_1", e.keyA, nil), 404, "")
}

// testSeed000RecordDuration is seed 000's duration_ms column: the record
// of a key whose job ran 2.5 s shows it; a key still in progress has none.
func testSeed000RecordDuration(t *testing.T, open opener) {
	clock := &shiftClock{}
	e := setup(t, open, &setupOpts{clientCfg: clock.clientCfg(), serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	durationOf := func(key string) (float64, bool) {
		t.Helper()
		r := e.req("GET", "/v1/idempotency/"+key, e.keyA, nil)
		expect(t, r, 200, "")
		d, ok := r.json(t)["duration_ms"].(float64)
		return d, ok
	}
	e.enqueue(e.keyA, map[string]any{"kind": "buffer", "queue": "geo", "idempotency_key": "geo_run"})
	j := e.claim(e.keyA, "geo")
	if d, ok := durationOf("geo_run"); ok {
		t.Fatalf("duration_ms %v on a record in progress", d)
	}
	clock.shift(2500 * time.Millisecond) // the buffer operation takes 2.5 s
	e.complete(e.keyA, j, map[string]any{"features_processed": 1200})
	if d, ok := durationOf("geo_run"); !ok || d < 2500 || d > 60000 {
		t.Fatalf("duration_ms %v (present %v), want the run's 2500 ms", d, ok)
	}
}

// testSeed004LongRunningAmongMany is seed 004's alert "long-running jobs:
// status = 'running' AND started_at < now() - 30 min: any": one job stuck
// for 31 minutes is found however many jobs started after it are running
// (a busy cluster runs more than one page of them).
func testSeed004LongRunningAmongMany(t *testing.T, open opener) {
	ctx := context.Background()
	clock := &shiftClock{}
	e := setup(t, open, &setupOpts{clientCfg: clock.clientCfg(), serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	claim := func(n int) {
		t.Helper()
		for n > 0 {
			jobs, err := e.client.Claim(ctx, idem.ClaimParams{Tenant: "a", Queues: []string{"sync"}, WorkerID: "w",
				Limit: min(n, 100), Lease: time.Hour})
			if err != nil || len(jobs) == 0 {
				t.Fatalf("claim: %d jobs (%v), %d to go", len(jobs), err, n)
			}
			n -= len(jobs)
		}
	}
	stuck := e.enqueue(e.keyA, map[string]any{"kind": "detect-alerts", "queue": "sync"})
	claim(1)
	clock.shift(31 * time.Minute)
	const busy = 600
	batch := make([]idem.EnqueueParams, busy)
	for i := range batch {
		batch[i] = idem.EnqueueParams{Kind: "sync-bigquery", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Opts: &idem.EnqueueOpts{Tenant: "a", Queue: "sync"}}
	}
	if _, err := e.client.EnqueueMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	claim(busy)
	for _, key := range []string{e.admin, e.keyA} {
		_, checks := e.healthOf(key)
		wantCheck(t, checks, "longest_running_s", "degraded")
		if v := checks["longest_running_s"].(map[string]any)["value"].(float64); v < 31*60 {
			t.Fatalf("longest running %v s, want job %s's 31 minutes", v, stuck)
		}
	}
}

// testSeed002Throttling is seed 002's throttling over HTTP: 100 jobs a
// minute per tenant and 1,000 a minute per queue, set by an admin. A burst
// of 150 emails from tenant a starts 100 this minute (the rest stay
// available and use no attempt) while tenant b's emails in the same queue
// are not held back; the next minute starts the other 50.
func testSeed002Throttling(t *testing.T, open opener) {
	clock := &shiftClock{}
	// One second into a minute: the rate windows are whole minutes, so the
	// first minute's claims all fall into one window.
	now := time.Now()
	clock.shift(now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now))
	e := setup(t, open, &setupOpts{clientCfg: clock.clientCfg(), serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	expect(t, e.req("PUT", "/v1/limits/tenant/a", e.admin, map[string]any{"rate": "100/1m"}), 200, "")
	expect(t, e.req("PUT", "/v1/limits/queue/emails", e.admin, map[string]any{"rate": "1000/1m"}), 200, "")
	burst := func(key string, n int) {
		t.Helper()
		items := make([]map[string]any, n)
		for i := range items {
			items[i] = map[string]any{"kind": "send_email", "queue": "emails", "args": map[string]any{"n": i}}
		}
		expect(t, e.req("POST", "/v1/jobs/batch", key, map[string]any{"jobs": items}), 200, "")
	}
	burst(e.keyA, 150)
	burst(e.keyB, 10)
	started := func(key string) int {
		t.Helper()
		n := 0
		for {
			r := e.req("POST", "/v1/claim", key, map[string]any{"queues": []string{"emails"}, "worker_id": "w1", "limit": 50})
			expect(t, r, 200, "")
			jobs := r.json(t)["jobs"].([]any)
			if len(jobs) == 0 {
				return n
			}
			for _, j := range jobs {
				e.complete(key, j.(map[string]any), nil)
			}
			n += len(jobs)
		}
	}
	if n := started(e.keyA); n != 100 {
		t.Fatalf("tenant a started %d in its first minute, want 100", n)
	}
	if n := started(e.keyB); n != 10 {
		t.Fatalf("tenant b started %d beside the throttled tenant a, want 10", n)
	}
	r := e.req("GET", "/v1/jobs?state=available&queue=emails&limit=500", e.keyA, nil)
	expect(t, r, 200, "")
	waiting := r.json(t)["jobs"].([]any)
	if len(waiting) != 50 {
		t.Fatalf("%d of tenant a's jobs wait, want 50", len(waiting))
	}
	for _, j := range waiting {
		if a := j.(map[string]any)["attempt"]; a != float64(0) {
			t.Fatalf("a throttled job used an attempt: %v", j)
		}
	}
	clock.shift(time.Until(clock.now().Truncate(time.Minute).Add(time.Minute + time.Second)))
	if n := started(e.keyA); n != 50 {
		t.Fatalf("tenant a started %d in the next minute, want 50", n)
	}
}
