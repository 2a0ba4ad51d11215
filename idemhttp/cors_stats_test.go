package idemhttp_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// TestCORSPreflightAllowsPut: the routes that create or replace (targets,
// schedules, limits, subscriptions) are PUTs; the preflight once allowed
// only GET, POST and DELETE, so a browser app could not call them.
func TestCORSPreflightAllowsPut(t *testing.T) {
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"https://app.example"}}}})
	r := e.req("OPTIONS", "/v1/targets/t1", "", nil, "Origin", "https://app.example",
		"Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "authorization, content-type")
	if r.status != 204 {
		t.Fatalf("preflight status %d", r.status)
	}
	if m := r.header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "PUT") {
		t.Fatalf("preflight of PUT /v1/targets/t1 allows %q: a browser refuses the PUT", m)
	}
}

// TestAllTenantsStatsLatencies: GET /v1/stats?all_tenants=true (admin)
// once took the wait and run percentiles from the default tenant's jobs
// only, while its queue counts covered every tenant.
func TestAllTenantsStatsLatencies(t *testing.T) {
	e := setup(t, openSQLite, nil)
	past := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "lat", "run_at": past})
	j := e.claim(e.keyA, "lat")
	expect(t, e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"]}), 200, "")
	waitP50 := func(r *resp) float64 {
		q := r.json(t)["queues"].(map[string]any)["lat"].(map[string]any)
		return q["wait_ms"].(map[string]any)["p50"].(float64)
	}
	own := waitP50(e.req("GET", "/v1/stats", e.keyA, nil))
	all := waitP50(e.req("GET", "/v1/stats?all_tenants=true", e.admin, nil))
	if own < 60000 || all != own {
		t.Fatalf("wait p50 of queue lat: tenant a's view %vms, admin all_tenants view %vms", own, all)
	}
}

// TestCORSAnyOrigin: seed 004's functions answer every origin
// (Access-Control-Allow-Origin: *) and allow the headers its browser
// clients send (authorization, x-client-info, apikey, content-type);
// AllowedOrigins ["*"] lets any origin's preflight and request through,
// without credentials, and the default AllowedHeaders hold seed 004's.
func TestCORSAnyOrigin(t *testing.T) {
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"*"}}}})
	r := e.req("OPTIONS", "/v1/jobs", "", nil, "Origin", "https://dashboard.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, x-client-info, apikey, content-type")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "https://dashboard.example" {
		t.Fatalf("preflight from any origin: %d %v", r.status, r.header)
	}
	allowed := strings.ToLower(r.header.Get("Access-Control-Allow-Headers"))
	for _, h := range []string{"authorization", "x-client-info", "apikey", "content-type", "idempotency-key"} {
		if !slices.Contains(strings.Split(allowed, ", "), h) {
			t.Errorf("preflight allows headers %q, not %s", allowed, h)
		}
	}
	r = e.req("GET", "/v1/stats", e.keyA, nil, "Origin", "http://localhost:5173")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
		r.header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("request from any origin: %d %v", r.status, r.header)
	}
}

// TestCORSAnyHeader: AllowedHeaders ["*"] answers a preflight with the
// headers it asks for, Authorization among them: browsers never let a
// literal "*" cover Authorization, which every call with an API key sends.
func TestCORSAnyHeader(t *testing.T) {
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{CORS: idemhttp.CORSConfig{
		AllowedOrigins: []string{"https://app.example"}, AllowedHeaders: []string{"*"}}}})
	r := e.req("OPTIONS", "/v1/jobs", "", nil, "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, x-custom")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Headers") != "authorization, x-custom" {
		t.Fatalf("preflight with headers *: %d allow-headers %q", r.status, r.header.Get("Access-Control-Allow-Headers"))
	}
	if !slices.Contains(r.header.Values("Vary"), "Access-Control-Request-Headers") {
		t.Errorf("preflight answer varies by %v, want Access-Control-Request-Headers too", r.header.Values("Vary"))
	}
}

// TestCORSVaryOnEveryAnswer: with CORS on, answers to requests without an
// Origin or from an origin not allowed say Vary: Origin too, so that a
// shared cache does not serve them (without CORS headers) to an allowed
// origin; they had no Vary.
func TestCORSVaryOnEveryAnswer(t *testing.T) {
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"https://app.example"}}}})
	for _, origin := range []string{"", "https://other.example", "https://app.example"} {
		var r *resp
		if origin == "" {
			r = e.req("GET", "/v1/stats", e.keyA, nil)
		} else {
			r = e.req("GET", "/v1/stats", e.keyA, nil, "Origin", origin)
		}
		if r.status != 200 || !slices.Contains(r.header.Values("Vary"), "Origin") {
			t.Errorf("origin %q: %d, Vary %q, want Origin among them", origin, r.status, r.header.Values("Vary"))
		}
	}
}
