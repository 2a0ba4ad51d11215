package idemhttp_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// shiftClock is time.Now moved by an offset the test sets.
type shiftClock struct{ offset atomic.Int64 }

func (c *shiftClock) now() time.Time        { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftClock) shift(d time.Duration) { c.offset.Store(int64(d)) }
func (c *shiftClock) clientCfg() *idem.Config {
	return &idem.Config{DisableMaintenance: true, Now: c.now}
}
func (c *shiftClock) serverCfg(h idemhttp.HealthConfig) *idemhttp.Config {
	return &idemhttp.Config{Now: c.now, Health: h}
}

// healthOf fetches GET /v1/health with key and returns status and checks;
// the reply's code must be 503 for an unhealthy status and 200 otherwise
// (API.md).
func (e *env) healthOf(key string) (string, map[string]any) {
	e.t.Helper()
	r := e.req("GET", "/v1/health", key, nil)
	m := r.json(e.t)
	status, _ := m["status"].(string)
	want := 200
	if status == "unhealthy" {
		want = 503
	}
	if r.status != want {
		e.t.Fatalf("GET /v1/health: %d with status %q, want %d", r.status, status, want)
	}
	return status, m["checks"].(map[string]any)
}

// wantCheck fails unless check name has status.
func wantCheck(t *testing.T, checks map[string]any, name, status string) {
	t.Helper()
	c, ok := checks[name].(map[string]any)
	if !ok {
		t.Fatalf("no check %s in %v", name, checks)
	}
	if c["status"] != status {
		t.Fatalf("check %s = %v, want %s", name, c, status)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	allChecks := []string{"dead_jobs", "available_jobs", "oldest_available_s", "success_rate_1m",
		"failed_per_kind_24h", "longest_running_s", "retry_rate_24h", "cache_bytes", "cache_expired_entries", "cache_hit_rate"}

	t.Run("a fresh server is healthy and names every check", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, nil)
		status, checks := e.healthOf(e.admin)
		if status != "healthy" {
			t.Fatalf("status %s %v", status, checks)
		}
		for _, name := range allChecks {
			wantCheck(t, checks, name, "healthy")
		}
		expect(t, e.req("GET", "/v1/health", "", nil), 401, "/problems/unauthorized")
	})

	t.Run("dead jobs make health unhealthy but keep the node ready", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{Health: idemhttp.HealthConfig{DeadJobs: 1, FailedPerKind24h: 1}}})
		e.dead(e.keyA, "q")
		_, checks := e.healthOf(e.admin)
		wantCheck(t, checks, "dead_jobs", "healthy")
		e.dead(e.keyA, "q")
		status, checks := e.healthOf(e.admin)
		if status != "unhealthy" {
			t.Fatalf("status %s", status)
		}
		wantCheck(t, checks, "dead_jobs", "unhealthy")
		wantCheck(t, checks, "failed_per_kind_24h", "degraded")
		wantCheck(t, checks, "success_rate_1m", "degraded")
		// tenant b sees only its own tenant: healthy.
		if status, _ := e.healthOf(e.keyB); status != "healthy" {
			t.Fatalf("tenant b status %s", status)
		}
		r := e.req("GET", "/readyz", "", nil)
		expect(t, r, 200, "")
		if r.json(t)["status"] != "healthy" { // API.md: {status:"healthy", checks}
			t.Fatalf("readyz %s", r.body)
		}
	})

	t.Run("HealthZero is a threshold of 0", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{Health: idemhttp.HealthConfig{
			DeadJobs: idemhttp.HealthZero, SuccessRate: idemhttp.HealthZero}}})
		status, checks := e.healthOf(e.admin)
		wantCheck(t, checks, "dead_jobs", "healthy")
		if th := checks["dead_jobs"].(map[string]any)["threshold"]; th != float64(0) || status != "healthy" {
			t.Fatalf("status %s, dead_jobs threshold %v, want healthy and 0", status, th)
		}
		e.dead(e.keyA, "q")
		status, checks = e.healthOf(e.admin)
		wantCheck(t, checks, "dead_jobs", "unhealthy")
		// A success rate of 0 % is not below a threshold of 0.
		wantCheck(t, checks, "success_rate_1m", "healthy")
		if status != "unhealthy" {
			t.Fatalf("status %s", status)
		}
	})

	t.Run("a backlog and an old available job are degraded", func(t *testing.T) {
		t.Parallel()
		var clk shiftClock
		e := setup(t, openSQLite, &setupOpts{clientCfg: clk.clientCfg(), serverCfg: clk.serverCfg(idemhttp.HealthConfig{AvailableJobs: 1})})
		e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
		_, checks := e.healthOf(e.admin)
		wantCheck(t, checks, "available_jobs", "healthy")
		wantCheck(t, checks, "oldest_available_s", "healthy")
		e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
		clk.shift(6 * time.Minute)
		status, checks := e.healthOf(e.admin)
		if status != "degraded" {
			t.Fatalf("status %s", status)
		}
		wantCheck(t, checks, "available_jobs", "degraded")
		wantCheck(t, checks, "oldest_available_s", "degraded")
	})

	t.Run("a job running for over 30 minutes is degraded", func(t *testing.T) {
		t.Parallel()
		var clk shiftClock
		e := setup(t, openSQLite, &setupOpts{clientCfg: clk.clientCfg(), serverCfg: clk.serverCfg(idemhttp.HealthConfig{})})
		e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
		e.claim(e.keyA, "q")
		_, checks := e.healthOf(e.admin)
		wantCheck(t, checks, "longest_running_s", "healthy")
		clk.shift(31 * time.Minute)
		_, checks = e.healthOf(e.admin)
		wantCheck(t, checks, "longest_running_s", "degraded")
	})

	t.Run("retries above the retry rate are degraded", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, nil)
		id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q", "max_attempts": 3})
		j := e.claim(e.keyA, "q")
		_, checks := e.healthOf(e.admin)
		wantCheck(t, checks, "retry_rate_24h", "healthy")
		r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"], "error": "transient", "retry_after": "0s"})
		expect(t, r, 200, "")
		_, checks = e.healthOf(e.admin)
		wantCheck(t, checks, "retry_rate_24h", "degraded")
	})

	t.Run("cache size, expired entries and hit rate", func(t *testing.T) {
		t.Parallel()
		var clk shiftClock
		st := openSQLite(t)
		counts := idemhttp.NewCacheCounters(st.(store.Counters), time.Hour, nil)
		ccfg := clk.clientCfg()
		ccfg.Observer = counts
		e := setup(t, func(*testing.T) store.Store { return st }, &setupOpts{clientCfg: ccfg, serverCfg: clk.serverCfg(idemhttp.HealthConfig{
			CacheBytes: 1, ExpiredEntries: 1, HitRate: 0.9, HitRateMinLookups: 2})})
		for i, key := range []string{"k1", "k2"} {
			id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q", "idempotency_key": key, "result_ttl": "1h"})
			j := e.claim(e.keyA, "q")
			if err := counts.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				_, checks := e.healthOf(e.admin)
				wantCheck(t, checks, "cache_hit_rate", "healthy") // fewer lookups than the minimum
			}
			r := e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"], "result": map[string]any{"ok": true}})
			expect(t, r, 200, "")
		}
		_, checks := e.healthOf(e.admin)
		wantCheck(t, checks, "cache_bytes", "degraded")
		wantCheck(t, checks, "cache_hit_rate", "degraded")
		wantCheck(t, checks, "cache_expired_entries", "healthy")
		clk.shift(400 * 24 * time.Hour) // past any result TTL
		_, checks = e.healthOf(e.admin)
		wantCheck(t, checks, "cache_expired_entries", "degraded")
	})
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	t.Run("ready on a migrated store, with the schema version", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, nil)
		r := e.req("GET", "/readyz", "", nil)
		expect(t, r, 200, "")
		schema := r.json(t)["checks"].(map[string]any)["schema"].(map[string]any)
		if schema["status"] != "healthy" || schema["value"] != schema["threshold"] || schema["value"].(float64) < 1 {
			t.Fatalf("readyz %s", r.body)
		}
		expect(t, e.req("GET", "/healthz", "", nil), 200, "")
	})
	t.Run("a fresh file served with no migration is unready", func(t *testing.T) {
		t.Parallel()
		st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "fresh.db"), &sqlitestore.Config{SkipMigrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := idemhttp.NewServer(client, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != 503 || !strings.Contains(rec.Body.String(), "schema") {
			t.Fatalf("readyz %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("a schema behind the binary is unready", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{SchemaVersion: func(context.Context) (int, int, error) {
			return 3, 5, nil
		}}})
		r := e.req("GET", "/readyz", "", nil)
		expect(t, r, 503, "")
		if r.json(t)["status"] != "unhealthy" { // API.md: {status:"unhealthy", checks}
			t.Fatalf("readyz %s", r.body)
		}
	})
	t.Run("an unreachable store is unready while healthz stays up", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{SchemaVersion: func(context.Context) (int, int, error) {
			return 0, 0, errors.New("connection refused")
		}}})
		e.st.Close()
		expect(t, e.req("GET", "/readyz", "", nil), 503, "")
		expect(t, e.req("GET", "/healthz", "", nil), 200, "")
	})
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	r := e.req("GET", "/healthz", "", nil)
	if len(r.header.Get("X-Request-Id")) != 32 {
		t.Fatalf("generated request id %q", r.header.Get("X-Request-Id"))
	}
	r = e.req("GET", "/v1/jobs/nope", e.keyA, nil, "X-Request-Id", "abc-123")
	if r.header.Get("X-Request-Id") != "abc-123" {
		t.Fatalf("honoured request id %q", r.header.Get("X-Request-Id"))
	}
	r = e.req("GET", "/nowhere", "", nil, "X-Request-Id", "bad id with spaces")
	if id := r.header.Get("X-Request-Id"); id == "" || id == "bad id with spaces" {
		t.Fatalf("invalid request id kept: %q", id)
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, nil)
		r := e.req("GET", "/v1/stats", e.keyA, nil, "Origin", "https://app.example")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatal("CORS header without configuration")
		}
	})
	t.Run("allowed origins get headers and preflights", func(t *testing.T) {
		t.Parallel()
		e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"https://app.example"}}}})
		r := e.req("OPTIONS", "/v1/jobs", "", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST")
		expect(t, r, 204, "")
		if r.header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.header.Get("Access-Control-Allow-Headers") == "" {
			t.Fatalf("preflight headers %v", r.header)
		}
		r = e.req("GET", "/v1/stats", e.keyA, nil, "Origin", "https://evil.example")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatal("CORS header for a foreign origin")
		}
	})
	if _, err := idemhttp.NewServer(nil, nil, nil); err == nil {
		t.Fatal("nil client accepted")
	}
}

// TestDurationsAcceptIntegerSeconds: "30" is 30 seconds wherever the API
// takes a duration, next to Go syntax.
func TestDurationsAcceptIntegerSeconds(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "d", "result_ttl": "3600", "dedup_window": "1h"})
	r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"d"}, "worker_id": "w", "lease": "90"})
	expect(t, r, 200, "")
	j := r.json(t)["jobs"].([]any)[0].(map[string]any)
	exp, err := time.Parse(time.RFC3339Nano, j["lease_expires_at"].(string))
	if err != nil || time.Until(exp) < 80*time.Second || time.Until(exp) > 100*time.Second {
		t.Fatalf("lease of \"90\": expires %v (%v)", exp, err)
	}
	expect(t, e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"d"}, "worker_id": "w", "lease": "ninety"}), 400, "/problems/invalid-request")
}
