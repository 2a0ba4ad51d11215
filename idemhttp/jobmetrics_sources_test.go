package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

// TestJobMetricsCountEveryInsert: idem_jobs_enqueued_total counts every
// job inserted, whatever made it — a batch (its jobs and its on_finish
// job) and a schedule's firing too — so enqueued never trails claimed;
// a keyed firing answered by its existing job counts as deduplicated.
func TestJobMetricsCountEveryInsert(t *testing.T) {
	t.Parallel()
	m := idemhttp.NewJobMetrics(0)
	e := setup(t, openSQLite, &setupOpts{clientCfg: &idem.Config{DisableMaintenance: true, Observer: m}})
	if err := e.server.Registry().Register(m); err != nil {
		t.Fatal(err)
	}
	batch := map[string]any{"key": "b1", "jobs": []any{
		map[string]any{"kind": "k", "queue": "bq", "args": map[string]any{"n": 1}},
		map[string]any{"kind": "k", "queue": "bq", "args": map[string]any{"n": 2}}},
		"on_finish": map[string]any{"kind": "report", "queue": "bq"}}
	expect(t, e.req("POST", "/v1/batches", e.keyA, batch), 201, "")
	expect(t, e.req("POST", "/v1/batches", e.keyA, batch), 200, "") // the same batch: nothing inserted

	expect(t, e.req("PUT", "/v1/schedules/s1", e.keyA, map[string]any{"every": "1h", "kind": "fire", "queue": "sq"}), 200, "")
	expect(t, e.req("POST", "/v1/schedules/s1/trigger", e.keyA, map[string]any{"key": "once"}), 201, "")
	expect(t, e.req("POST", "/v1/schedules/s1/trigger", e.keyA, map[string]any{"key": "once"}), 200, "")

	body := string(e.req("GET", "/metrics", "", nil).body)
	for _, want := range []string{
		`idem_jobs_enqueued_total{kind="k",queue="bq"} 2`,
		`idem_jobs_enqueued_total{kind="report",queue="bq"} 1`,
		`idem_jobs_enqueued_total{kind="fire",queue="sq"} 1`,
		`idem_jobs_deduplicated_total{kind="fire",queue="sq"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Fatalf("metrics lack %s:\n%s", want, grepLines(body, "idem_jobs_"))
		}
	}
}
