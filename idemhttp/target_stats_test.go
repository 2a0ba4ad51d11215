package idemhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestTargetStatsPerTenant: two tenants each deliver to a target named
// "orders" (a's answers 200 twice, b's 410 once). The admin's
// GET /v1/stats?all_tenants=true once built its per-target section from
// the default tenant's attempts only; it now has both tenants' targets,
// apart, under targets_by_tenant. A tenant key sees its own target only.
func TestTargetStatsPerTenant(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) { t.Parallel(); testTargetStatsPerTenant(t, open) })
	}
}

func testTargetStatsPerTenant(t *testing.T, open opener) {
	receiver := func(status int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	e := setup(t, open, &setupOpts{start: true, clientCfg: &idem.Config{DisableMaintenance: true,
		Queues: map[string]idem.QueueConfig{"hooks": {Deliver: true}}, PollInterval: 20 * time.Millisecond}})
	expect(t, e.req("PUT", "/v1/targets/orders", e.keyA, map[string]any{"url": receiver(200), "queue": "hooks"}), 201, "")
	expect(t, e.req("PUT", "/v1/targets/orders", e.keyB, map[string]any{"url": receiver(410), "queue": "hooks"}), 201, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for key, want := range map[string]idem.JobState{e.keyA: idem.StateCompleted, e.keyB: idem.StateDead} {
		n := 1
		if key == e.keyA {
			n = 2
		}
		for range n {
			id, _ := strconv.ParseInt(e.enqueue(key, map[string]any{"kind": "order.shipped", "queue": "hooks"}), 10, 64)
			if job, err := e.client.JobWait(ctx, id); err != nil || job.State != want {
				t.Fatalf("job %d: %+v, %v; want %s", id, job, err, want)
			}
		}
	}

	type targetStats struct {
		Attempts, Completed, Dead int
	}
	type stats struct {
		Targets         map[string]targetStats            `json:"targets"`
		TargetsByTenant map[string]map[string]targetStats `json:"targets_by_tenant"`
	}
	get := func(path, key string) stats {
		t.Helper()
		r := e.req("GET", path, key, nil)
		expect(t, r, 200, "")
		var s stats
		if err := json.Unmarshal(r.body, &s); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
		return s
	}
	a, b := targetStats{Attempts: 2, Completed: 2}, targetStats{Attempts: 1, Dead: 1}
	all := get("/v1/stats?all_tenants=true", e.admin)
	if len(all.TargetsByTenant) != 2 || len(all.TargetsByTenant["a"]) != 1 || all.TargetsByTenant["a"]["orders"] != a ||
		len(all.TargetsByTenant["b"]) != 1 || all.TargetsByTenant["b"]["orders"] != b || all.Targets != nil {
		t.Errorf("admin all_tenants view: targets %v, targets_by_tenant %v; want a's orders %v and b's %v apart",
			all.Targets, all.TargetsByTenant, a, b)
	}
	for key, want := range map[string]targetStats{e.keyA: a, e.keyB: b} {
		own := get("/v1/stats", key)
		if len(own.Targets) != 1 || own.Targets["orders"] != want || own.TargetsByTenant != nil {
			t.Errorf("tenant view: targets %v, targets_by_tenant %v; want only its own orders %v", own.Targets, own.TargetsByTenant, want)
		}
	}
	if def := get("/v1/stats", e.admin); def.Targets != nil || def.TargetsByTenant != nil {
		t.Errorf("admin's default tenant view (no targets there): targets %v, targets_by_tenant %v", def.Targets, def.TargetsByTenant)
	}
}
