package idemhttp_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

// TestMetricsQueueNamedOther: a queue a user named "other", among the
// MetricsMaxQueues largest, does not make /metrics fail with two
// idem_jobs{queue="other"} series: it is summed with the rest.
func TestMetricsQueueNamedOther(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{MetricsMaxQueues: 2}})
	var items []idem.EnqueueParams
	for queue, n := range map[string]int{"other": 5, "a": 4, "b": 3, "c": 1} {
		for range n {
			items = append(items, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: queue}})
		}
	}
	if _, err := e.client.EnqueueMany(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	r := e.req("GET", "/metrics", "", nil)
	expect(t, r, 200, "")
	if !regexp.MustCompile(`idem_jobs\{queue="other",state="available"\} 6\n`).Match(r.body) {
		t.Fatalf("other does not sum the queue named other and c (a and b keep their series):\n%s", r.body)
	}
}

// TestReadyzDraining: once the server drains (http.Server.Shutdown began),
// /readyz answers 503, so a readiness probe on a separate ops listener
// stops sending traffic to a node whose API listener is closing.
func TestReadyzDraining(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	if code, _ := e.readyStatus(); code != 200 {
		t.Fatalf("before drain: %d", code)
	}
	e.server.Drain()
	r := e.req("GET", "/readyz", "", nil)
	expect(t, r, 503, "")
	checks, _ := r.json(t)["checks"].(map[string]any)
	if d, _ := checks["draining"].(map[string]any); d["status"] != "unhealthy" {
		t.Fatalf("draining check %v, want unhealthy: %s", d, r.body)
	}
}
