package idemhttp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// testBatchOnFinishHTTP: a batch with a completion job (on_finish) over
// HTTP; the job waits until both children finished (one completed, one
// dead), then is claimable once and reads the outcomes from the batch.
func testBatchOnFinishHTTP(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := map[string]any{"key": "upload-9", "jobs": []map[string]any{
		{"kind": "upload", "queue": "uploads", "args": map[string]any{"file": "a.csv"}},
		{"kind": "upload", "queue": "uploads", "args": map[string]any{"file": "b.csv"}},
	}, "on_finish": map[string]any{"kind": "report", "queue": "reports", "args": map[string]any{"notify": "u1"},
		"metadata": map[string]any{"owner": "ops"}}}
	r := e.req("POST", "/v1/batches", e.keyA, body)
	expect(t, r, 201, "")
	b := r.json(t)["batch"].(map[string]any)
	id := b["id"].(string)
	of, _ := b["on_finish"].(map[string]any)
	if of == nil || of["state"] != "pending" || b["total"] != float64(2) {
		t.Fatalf("create: %s", r.body)
	}
	if m := of["metadata"].(map[string]any); m["owner"] != "ops" || m["idem_batch_id"] != float64(mustAtoi(t, id)) {
		t.Fatalf("completion job metadata: %v", m)
	}
	noneClaimable := func() {
		t.Helper()
		r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"reports"}, "worker_id": "w1", "lease": "30s"})
		expect(t, r, 200, "")
		if jobs := r.json(t)["jobs"].([]any); len(jobs) != 0 {
			t.Fatalf("claimed %s before every child finished", r.body)
		}
	}
	noneClaimable()
	j := e.claim(e.keyA, "uploads")
	expect(t, e.req("POST", "/v1/jobs/"+j["id"].(string)+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"]}), 200, "")
	noneClaimable()
	j = e.claim(e.keyA, "uploads")
	expect(t, e.req("POST", "/v1/jobs/"+j["id"].(string)+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"],
		"error": "unreadable", "retry": false}), 200, "")
	got := e.claim(e.keyA, "reports")
	if got["id"] != of["id"] {
		t.Fatalf("claimed %v, want the completion job %v", got["id"], of["id"])
	}
	noneClaimable()
	r = e.req("GET", "/v1/batches/"+id, e.keyA, nil)
	expect(t, r, 200, "")
	m := r.json(t)
	c := m["counts"].(map[string]any)
	if m["finished"] != true || c["completed"] != float64(1) || c["dead"] != float64(1) ||
		m["on_finish"].(map[string]any)["state"] != "running" {
		t.Fatalf("batch after its children: %s", r.body)
	}
	// A repeat of the batch creates no second completion job.
	r = e.req("POST", "/v1/batches", e.keyA, body)
	expect(t, r, 200, "")
	if n := e.countJobs(); n != 3 {
		t.Fatalf("%d jobs, want 2 children and 1 completion job", n)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("id %q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func testBatchOnFinishBadInput(t *testing.T, open opener) {
	e := setup(t, open, nil)
	one := []map[string]any{{"kind": "upload"}}
	for name, c := range map[string]struct {
		onFinish any
		field    string
	}{
		"no kind":         {map[string]any{"queue": "q"}, "on_finish.kind"},
		"key":             {map[string]any{"kind": "r", "idempotency_key": "k"}, "on_finish.idempotency_key"},
		"depends_on":      {map[string]any{"kind": "r", "depends_on": []string{"1"}}, "on_finish.depends_on"},
		"reserved meta":   {map[string]any{"kind": "r", "metadata": map[string]any{"idem_batch_id": 3}}, "on_finish.metadata"},
		"bad retry":       {map[string]any{"kind": "r", "retry": map[string]any{"factor": 0.5}}, "on_finish.retry.factor"},
		"bad max_attempt": {map[string]any{"kind": "r", "max_attempts": 5000}, "on_finish.max_attempts"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.req("POST", "/v1/batches", e.keyA, map[string]any{"key": "b", "jobs": one, "on_finish": c.onFinish})
			expect(t, r, 400, "/problems/invalid-request")
			if errs, _ := r.json(t)["errors"].(map[string]any); errs[c.field] == nil {
				t.Fatalf("problem does not name %s: %s", c.field, r.body)
			}
		})
	}
	if n := e.countJobs(); n != 0 {
		t.Fatalf("%d jobs written by refused batches", n)
	}
}

// testEnqueueRetry: a job's own retry policy over HTTP (seed 002: 4
// attempts, 60 s → 120 s → 240 s, no jitter) decides when its failures
// run again.
func testEnqueueRetry(t *testing.T, open opener) {
	clock := &shiftClock{}
	e := setup(t, open, &setupOpts{clientCfg: clock.clientCfg(), serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "hook", "queue": "mw",
		"retry": map[string]any{"max_attempts": 4, "base": "60s", "factor": 2, "max": "1h", "jitter": 0}})
	expect(t, r, 201, "")
	j := r.job(t)
	if j["max_attempts"] != float64(4) {
		t.Fatalf("max_attempts: %s", r.body)
	}
	if rt, _ := j["retry"].(map[string]any); rt == nil || rt["base"] != "1m0s" || rt["factor"] != float64(2) || rt["jitter"] != float64(0) {
		t.Fatalf("retry as stored: %s", r.body)
	}
	id := j["id"].(string)
	var shift time.Duration
	for i, want := range []time.Duration{60 * time.Second, 120 * time.Second, 240 * time.Second} {
		c := e.claim(e.keyA, "mw")
		if c["id"] != id {
			t.Fatalf("claimed %v, want %s", c["id"], id)
		}
		before := clock.now()
		r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": c["lease_token"], "error": "503"})
		after := clock.now()
		expect(t, r, 200, "")
		m := r.json(t)
		runAt, err := time.Parse(time.RFC3339Nano, m["run_at"].(string))
		if err != nil || m["state"] != "retryable" {
			t.Fatalf("after failure %d: %s", i+1, r.body)
		}
		if runAt.Before(before.Add(want).Add(-time.Millisecond)) || runAt.After(after.Add(want).Add(time.Millisecond)) {
			t.Fatalf("failure %d: next run at %s, want %s after the failure (%s…%s)", i+1, runAt, want, before, after)
		}
		// Not due before its delay; due after it.
		r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"mw"}, "worker_id": "w1", "lease": "30s"})
		expect(t, r, 200, "")
		if jobs := r.json(t)["jobs"].([]any); len(jobs) != 0 {
			t.Fatalf("failure %d: claimed again before the delay: %s", i+1, r.body)
		}
		shift += want + time.Second
		clock.shift(shift)
	}
	// The fourth attempt is the last: its failure is dead.
	c := e.claim(e.keyA, "mw")
	r = e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": c["lease_token"], "error": "503"})
	expect(t, r, 200, "")
	if m := r.json(t); m["state"] != "dead" || m["attempt"] != float64(4) {
		t.Fatalf("fourth failure: %s", r.body)
	}
}

func testEnqueueRetryBadInput(t *testing.T, open opener) {
	e := setup(t, open, nil)
	for name, c := range map[string]struct {
		retry map[string]any
		extra map[string]any
		field string
	}{
		"base not a duration":      {map[string]any{"base": "soon"}, nil, "retry.base"},
		"base zero":                {map[string]any{"base": "0s"}, nil, "retry.base"},
		"base negative":            {map[string]any{"base": "-5s"}, nil, "retry.base"},
		"factor below 1":           {map[string]any{"factor": 0.5}, nil, "retry.factor"},
		"jitter above 1":           {map[string]any{"jitter": 1.5}, nil, "retry.jitter"},
		"max below base":           {map[string]any{"base": "60s", "max": "10s"}, nil, "retry.max"},
		"base above max's default": {map[string]any{"base": "2h"}, nil, "retry.max"},
		"max below base's default": {map[string]any{"max": "1s"}, nil, "retry.max"},
		"attempts zero":            {map[string]any{"max_attempts": 0}, nil, "retry.max_attempts"},
		"attempts too many":        {map[string]any{"max_attempts": 1001}, nil, "retry.max_attempts"},
		"attempts disagree":        {map[string]any{"max_attempts": 4}, map[string]any{"max_attempts": 3}, "retry.max_attempts"},
		"bad delay":                {map[string]any{"delays": []string{"1s", "x"}}, nil, "retry.delays[1]"},
		"delays and base":          {map[string]any{"delays": []string{"1s"}, "base": "1s"}, nil, "retry.delays"},
	} {
		t.Run(name, func(t *testing.T) {
			body := map[string]any{"kind": "k", "retry": c.retry}
			for k, v := range c.extra {
				body[k] = v
			}
			r := e.req("POST", "/v1/jobs", e.keyA, body)
			expect(t, r, 400, "/problems/invalid-request")
			if errs, _ := r.json(t)["errors"].(map[string]any); errs[c.field] == nil {
				t.Fatalf("problem does not name %s: %s", c.field, r.body)
			}
			// The same in a batch child names the child.
			r = e.req("POST", "/v1/batches", e.keyA, map[string]any{"key": "b", "jobs": []map[string]any{body}})
			expect(t, r, 400, "/problems/invalid-request")
			if errs, _ := r.json(t)["errors"].(map[string]any); errs["jobs[0]."+c.field] == nil {
				t.Fatalf("batch problem does not name jobs[0].%s: %s", c.field, r.body)
			}
		})
	}
	r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "retry": map[string]any{"initial": "1s"}})
	expect(t, r, 400, "/problems/invalid-request")
	if !strings.Contains(string(r.body), "initial") {
		t.Fatalf("unknown retry field not named: %s", r.body)
	}
	if n := e.countJobs(); n != 0 {
		t.Fatalf("%d jobs written by refused requests", n)
	}
}

// testWindowZeroExpiry: a live record of dedup window 0 shows expires_at
// as a time — its job's earliest finish plus its result TTL — while it
// waits, while it runs, and after it finished.
func testWindowZeroExpiry(t *testing.T, open opener) {
	clock := &shiftClock{}
	e := setup(t, open, &setupOpts{clientCfg: clock.clientCfg(), serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	expiry := func() (time.Time, map[string]any) {
		t.Helper()
		r := e.req("GET", "/v1/idempotency/w0", e.keyA, nil)
		expect(t, r, 200, "")
		rec := r.json(t)
		s, ok := rec["expires_at"].(string)
		if !ok {
			t.Fatalf("expires_at = %#v, want a time: %s", rec["expires_at"], r.body)
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return at, rec
	}
	within := func(what string, got, lo, hi time.Time) {
		t.Helper()
		if got.Before(lo.Add(-time.Millisecond)) || got.After(hi.Add(time.Millisecond)) {
			t.Fatalf("%s: expires_at %s, want between %s and %s", what, got, lo, hi)
		}
	}
	r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "queue": "w0", "idempotency_key": "w0",
		"dedup_window": "0s", "result_ttl": "1h"})
	expect(t, r, 201, "")
	id := r.job(t)["id"].(string)
	before := clock.now()
	got, rec := expiry()
	within("available", got, before.Add(time.Hour), clock.now().Add(time.Hour))
	if rec["dedup_until"] != nil || rec["status"] != "in_progress" {
		t.Fatalf("live window-0 record: %v", rec)
	}
	// Running with a 30 s lease: at least the lease's end + 1 h.
	j := e.claim(e.keyA, "w0")
	lease, err := time.Parse(time.RFC3339Nano, j["lease_expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = expiry()
	within("running", got, lease.Add(time.Hour), lease.Add(time.Hour))
	// Finished: the stored expiry, finish + 1 h.
	clock.shift(10 * time.Second)
	r = e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"], "result": 1})
	expect(t, r, 200, "")
	fin, err := time.Parse(time.RFC3339Nano, r.json(t)["finished_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	got, rec = expiry()
	within("finished", got, fin.Add(time.Hour), fin.Add(time.Hour))
	if rec["status"] != "completed" || rec["dedup_until"] == nil {
		t.Fatalf("finished window-0 record: %v", rec)
	}
}
