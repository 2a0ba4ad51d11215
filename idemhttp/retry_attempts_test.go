package idemhttp_test

import (
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

func TestRetryWithOnlyMaxAttemptsKeepsTheConfiguredBackoffSQLite(t *testing.T) {
	t.Parallel()
	testRetryOnlyMaxAttempts(t, openSQLite)
}

func TestRetryWithOnlyMaxAttemptsKeepsTheConfiguredBackoffPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	testRetryOnlyMaxAttempts(t, openPostgres)
}

// testRetryOnlyMaxAttempts: `"retry": {"max_attempts": 3}` sets the
// attempts only; the job backs off by the server's policy for its queue
// (Config.RetryByQueue, [retry_by_queue] of `idem serve`), as a job without
// "retry" does. It used to store an empty policy of its own, so its
// failures retried after idem's built-in 5 s instead of the queue's hour.
func testRetryOnlyMaxAttempts(t *testing.T, open opener) {
	clock := &shiftClock{}
	cfg := clock.clientCfg()
	cfg.RetryByQueue = map[string]idem.RetryPolicy{"mw": {Base: time.Hour, Max: 2 * time.Hour, Jitter: -1}}
	e := setup(t, open, &setupOpts{clientCfg: cfg, serverCfg: clock.serverCfg(idemhttp.HealthConfig{})})
	for _, body := range []map[string]any{
		{"kind": "hook", "queue": "mw", "max_attempts": 3},
		{"kind": "hook", "queue": "mw", "retry": map[string]any{"max_attempts": 3}},
	} {
		r := e.req("POST", "/v1/jobs", e.keyA, body)
		expect(t, r, 201, "")
		j := r.job(t)
		if j["max_attempts"] != float64(3) {
			t.Fatalf("max_attempts: %s", r.body)
		}
		c := e.claim(e.keyA, "mw")
		if c["id"] != j["id"] {
			t.Fatalf("claimed %v, want %v", c["id"], j["id"])
		}
		before := clock.now()
		r = e.req("POST", "/v1/jobs/"+j["id"].(string)+"/fail", e.keyA, map[string]any{"lease_token": c["lease_token"], "error": "503"})
		expect(t, r, 200, "")
		m := r.json(t)
		runAt, err := time.Parse(time.RFC3339Nano, m["run_at"].(string))
		if err != nil || m["state"] != "retryable" {
			t.Fatalf("after the failure: %s", r.body)
		}
		if runAt.Before(before.Add(time.Hour).Add(-time.Millisecond)) {
			t.Fatalf("%v: next run at %s, %s after the failure; want the queue's 1h", body, runAt, runAt.Sub(before))
		}
	}
}
