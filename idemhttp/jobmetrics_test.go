package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

// TestJobMetrics: job events reach /metrics as counters and histograms
// labelled by queue and kind, with queues beyond the bound as "other".
func TestJobMetrics(t *testing.T) {
	t.Parallel()
	m := idemhttp.NewJobMetrics(2)
	e := setup(t, openSQLite, &setupOpts{clientCfg: &idem.Config{DisableMaintenance: true, Observer: m}})
	if err := e.server.Registry().Register(m); err != nil {
		t.Fatal(err)
	}
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q1", "idempotency_key": "a"})
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q1", "idempotency_key": "a"}) // duplicate
	e.dead(e.keyA, "q2")
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q3"})
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q4"})
	r := e.req("GET", "/metrics", "", nil)
	expect(t, r, 200, "")
	body := string(r.body)
	for _, want := range []string{
		`idem_jobs_enqueued_total{kind="k",queue="q1"} 1`,
		`idem_jobs_deduplicated_total{kind="k",queue="q1"} 1`,
		`idem_jobs_claimed_total{kind="k",queue="q2"} 1`,
		`idem_jobs_failed_total{kind="k",queue="q2"} 1`,
		`idem_jobs_dead_total{kind="k",queue="q2"} 1`,
		`idem_jobs_enqueued_total{kind="k",queue="other"} 2`,
		`idem_job_wait_seconds_count{kind="k",queue="q2"} 1`,
		`idem_job_run_seconds_count{kind="k",queue="q2"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("metrics lack %s:\n%s", want, grepLines(body, "idem_job"))
		}
	}
	if strings.Contains(body, `tenant=`) {
		t.Fatal("a metric is labelled by tenant")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestStatsPerKindAndAcrossTenants: /v1/stats has the per-kind summary;
// an admin reads every tenant with all_tenants=true, a tenant key may not.
func TestStatsPerKindAndAcrossTenants(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	e.dead(e.keyA, "s")
	id := e.enqueue(e.keyB, map[string]any{"kind": "report", "queue": "s"})
	j := e.claim(e.keyB, "s")
	expect(t, e.req("POST", "/v1/jobs/"+id+"/complete", e.keyB, map[string]any{"lease_token": j["lease_token"]}), 200, "")

	r := e.req("GET", "/v1/stats", e.keyA, nil)
	expect(t, r, 200, "")
	kinds := r.json(t)["kinds"].(map[string]any)
	k := kinds["k"].(map[string]any)
	if len(kinds) != 1 || k["count"] != float64(1) || k["failed_24h"] != float64(1) {
		t.Fatalf("tenant a kinds %v", kinds)
	}
	r = e.req("GET", "/v1/stats?all_tenants=true", e.admin, nil)
	expect(t, r, 200, "")
	m := r.json(t)
	kinds = m["kinds"].(map[string]any)
	rep := kinds["report"].(map[string]any)
	if len(kinds) != 2 || rep["count"] != float64(1) || rep["max_duration_ms"].(float64) < 0 {
		t.Fatalf("all tenants kinds %v", kinds)
	}
	counts := m["queues"].(map[string]any)["s"].(map[string]any)["counts"].(map[string]any)
	if counts["dead"] != float64(1) || counts["completed"] != float64(1) {
		t.Fatalf("all tenants counts %v", counts)
	}
	expect(t, e.req("GET", "/v1/stats?all_tenants=true", e.keyA, nil), 403, "/problems/forbidden")
}
