package idemhttp_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// testSchedules: put, get, list (last and next firings), trigger, delete
// (the jobs stay), bad input naming the field with nothing stored, and
// tenant isolation.
func testSchedules(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := map[string]any{"cron": "*/5 * * * *", "timezone": "Europe/Berlin", "kind": "detect-alerts",
		"args": map[string]any{"rule": "r1"}, "missed": "catch_up"}
	r := e.req("PUT", "/v1/schedules/alerts", e.keyA, body)
	expect(t, r, 200, "")
	s := r.json(t)
	if s["name"] != "alerts" || s["tenant"] != "a" || s["grain"] != "minute" || s["missed"] != "catch_up" || s["next_fire_at"] == nil {
		t.Fatalf("put schedule: %s", r.body)
	}
	// Replacing keeps it one schedule.
	body["priority"] = 3
	expect(t, e.req("PUT", "/v1/schedules/alerts", e.keyA, body), 200, "")
	expect(t, e.req("PUT", "/v1/schedules/hourly", e.keyA, map[string]any{"every": "1h", "kind": "rollup", "grain": "hour"}), 200, "")

	r = e.req("GET", "/v1/schedules", e.keyA, nil)
	expect(t, r, 200, "")
	list, _ := r.json(t)["schedules"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["priority"] != float64(3) {
		t.Fatalf("list: %s", r.body)
	}
	expect(t, e.req("GET", "/v1/schedules/alerts", e.keyB, nil), 404, "")
	r = e.req("GET", "/v1/schedules", e.keyB, nil)
	if l, _ := r.json(t)["schedules"].([]any); len(l) != 0 {
		t.Errorf("tenant b sees %s", r.body)
	}

	r = e.req("POST", "/v1/schedules/alerts/trigger", e.keyA, nil)
	expect(t, r, 201, "")
	job := r.job(t)
	if job["kind"] != "detect-alerts" || job["tenant"] != "a" {
		t.Fatalf("trigger: %s", r.body)
	}
	r = e.req("POST", "/v1/schedules/alerts/trigger", e.keyA, map[string]any{"key": "deploy-1"})
	expect(t, r, 201, "")
	r2 := e.req("POST", "/v1/schedules/alerts/trigger", e.keyA, map[string]any{"key": "deploy-1"})
	expect(t, r2, 200, "")
	if r.job(t)["id"] != r2.job(t)["id"] {
		t.Errorf("keyed triggers made two jobs: %s / %s", r.body, r2.body)
	}
	r = e.req("GET", "/v1/schedules/alerts", e.keyA, nil)
	if g := r.json(t); g["last_job_id"] != r2.job(t)["id"] || g["last_job_state"] != "available" {
		t.Errorf("after trigger: %s", r.body)
	}
	expect(t, e.req("POST", "/v1/schedules/nope/trigger", e.keyA, nil), 404, "")
	// A pull worker claims a firing: the claim's reply matches the
	// document although the firing's key starts with § (not a Key).
	if j := e.claim(e.keyA, "default"); !strings.HasPrefix(j["idempotency_key"].(string), "§alerts:a:") {
		t.Errorf("claimed firing: %v", j)
	}

	jobs := e.countJobs()
	expect(t, e.req("DELETE", "/v1/schedules/alerts", e.keyA, nil), 204, "")
	expect(t, e.req("DELETE", "/v1/schedules/alerts", e.keyA, nil), 404, "")
	if n := e.countJobs(); n != jobs {
		t.Errorf("delete removed jobs: %d, then %d", jobs, n)
	}

	bad := []struct {
		field string
		body  map[string]any
	}{
		{"cron", map[string]any{"cron": "every day", "kind": "k"}},
		{"timezone", map[string]any{"cron": "0 * * * *", "timezone": "Nowhere/City", "kind": "k"}},
		{"every", map[string]any{"every": "10s", "kind": "k"}},
		{"every", map[string]any{"every": "soon", "kind": "k"}},
		{"missed", map[string]any{"every": "1h", "missed": "never", "kind": "k"}},
		{"grain", map[string]any{"every": "1m", "grain": "hour", "kind": "k"}},
		{"kind", map[string]any{"every": "1h"}},
		{"dedup_window", map[string]any{"every": "1h", "kind": "k", "dedup_window": "1m"}},
	}
	for _, b := range bad {
		r := e.req("PUT", "/v1/schedules/bad", e.keyA, b.body)
		expect(t, r, 400, "")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs[b.field] == nil {
			t.Errorf("%v: problem %s does not name %s", b.body, r.body, b.field)
		}
	}
	expect(t, e.req("GET", "/v1/schedules/bad", e.keyA, nil), 404, "")
	expect(t, e.req("PUT", "/v1/schedules/bad", e.keyA, map[string]any{"every": "1h", "kind": "k", "timeout": "soon"}), 400, "")
	expect(t, e.req("PUT", "/v1/schedules/a:b", e.keyA, map[string]any{"every": "1h", "kind": "k"}), 400, "")
}

// testJobTimeout: the enqueue body's timeout is stored with the job and
// caps a pull claim's lease; a bad one is a 400 naming the field.
func testJobTimeout(t *testing.T, open opener) {
	e := setup(t, open, nil)
	r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "render", "queue": "pull", "timeout": "5s"})
	expect(t, r, 201, "")
	r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"pull"}, "worker_id": "w", "lease": "60s"})
	expect(t, r, 200, "")
	jobs, _ := r.json(t)["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("claim: %s", r.body)
	}
	j := jobs[0].(map[string]any)
	started, err1 := time.Parse(time.RFC3339Nano, j["started_at"].(string))
	lease, err2 := time.Parse(time.RFC3339Nano, j["lease_expires_at"].(string))
	if err1 != nil || err2 != nil || lease.Sub(started) != 5*time.Second {
		t.Errorf("lease %v after the start, want the 5s timeout: %s", lease.Sub(started), r.body)
	}
	r = e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "render", "timeout": "later"})
	expect(t, r, 400, "")
	if errs, _ := r.json(t)["errors"].(map[string]any); errs["timeout"] == nil {
		t.Errorf("bad timeout: %s", r.body)
	}
}

// testScheduleRetry: a schedule's retry is the policy of every job it fires
// (seed 004's 1 s → 5 s → 25 s over 4 attempts, set over HTTP without a
// server setting); it is shown with the schedule, and a bad one is a 400
// naming the field with nothing stored.
func testScheduleRetry(t *testing.T, open opener) {
	clock := &shiftClock{}
	e := setup(t, open, &setupOpts{clientCfg: clock.clientCfg(), serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	body := map[string]any{"cron": "0 3 * * *", "grain": "day", "kind": "cdp-build", "queue": "scheduled",
		"retry": map[string]any{"max_attempts": 4, "delays": []string{"1s", "5s", "25s"}, "jitter": 0}}
	r := e.req("PUT", "/v1/schedules/cdp-build", e.keyA, body)
	expect(t, r, 200, "")
	for _, r := range []*resp{r, e.req("GET", "/v1/schedules/cdp-build", e.keyA, nil)} {
		s := r.json(t)
		retry, _ := s["retry"].(map[string]any)
		if s["max_attempts"] != float64(4) || retry == nil || fmt.Sprint(retry["delays"]) != "[1s 5s 25s]" || retry["jitter"] != float64(0) {
			t.Fatalf("schedule: %s", r.body)
		}
	}
	r = e.req("POST", "/v1/schedules/cdp-build/trigger", e.keyA, nil)
	expect(t, r, 201, "")
	id := r.job(t)["id"].(string)
	var offset time.Duration
	for i, want := range []time.Duration{time.Second, 5 * time.Second, 25 * time.Second, 0} {
		j := e.claim(e.keyA, "scheduled")
		if j["id"] != id {
			t.Fatalf("attempt %d: claimed %v, want the triggered run %s", i+1, j["id"], id)
		}
		before := clock.now()
		r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"], "error": "warehouse unreachable"})
		expect(t, r, 200, "")
		job := r.json(t)
		if want == 0 {
			if job["state"] != "dead" {
				t.Fatalf("after attempt 4: %s, want dead", r.body)
			}
			break
		}
		runAt, err := time.Parse(time.RFC3339Nano, job["run_at"].(string))
		if err != nil || job["state"] != "retryable" || runAt.Sub(before) < want || runAt.Sub(before) > want+5*time.Second {
			t.Fatalf("after attempt %d: %s, want retryable in %v", i+1, r.body, want)
		}
		offset += want // the retry is due
		clock.shift(offset)
	}

	for _, bad := range []struct {
		field string
		retry map[string]any
		extra map[string]any
	}{
		{"retry.factor", map[string]any{"factor": 0.5}, nil},
		{"retry.delays[1]", map[string]any{"delays": []string{"1s", "soon"}}, nil},
		{"retry.max_attempts", map[string]any{"max_attempts": 3}, map[string]any{"max_attempts": 4}},
	} {
		b := map[string]any{"every": "1h", "kind": "k", "retry": bad.retry}
		for k, v := range bad.extra {
			b[k] = v
		}
		r := e.req("PUT", "/v1/schedules/bad", e.keyA, b)
		expect(t, r, 400, "")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs[bad.field] == nil {
			t.Errorf("%v: problem %s does not name %s", bad.retry, r.body, bad.field)
		}
	}
	expect(t, e.req("GET", "/v1/schedules/bad", e.keyA, nil), 404, "")
}
