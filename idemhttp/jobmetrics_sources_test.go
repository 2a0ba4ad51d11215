package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
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

// TestJobMetricsBatchItemDeduplicated: a batch item whose idempotency key
// an existing job holds (or an earlier item of the same batch holds) inserts no
// job: it counts as deduplicated, not enqueued, on both stores, so
// idem_jobs_enqueued_total counts the jobs the batch created and no more.
func TestJobMetricsBatchItemDeduplicated(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "postgres" {
				dbtest.PostgresURL(t) // skips loudly without a server
			}
			m := idemhttp.NewJobMetrics(0)
			e := setup(t, open, &setupOpts{clientCfg: &idem.Config{DisableMaintenance: true, Observer: m}})
			if err := e.server.Registry().Register(m); err != nil {
				t.Fatal(err)
			}
			// A batch's items are keyed batch key + "/" + their own key
			// (idem.BatchJobKey): this job holds the first item's.
			e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "dq", "idempotency_key": "b-dedup/held"})
			batch := map[string]any{"key": "b-dedup", "jobs": []any{
				map[string]any{"kind": "k", "queue": "dq", "idempotency_key": "held"}, // the existing job's
				map[string]any{"kind": "k", "queue": "dq", "idempotency_key": "new"},
				map[string]any{"kind": "k", "queue": "dq", "idempotency_key": "new"}, // the item above's
				map[string]any{"kind": "k", "queue": "dq"}}}
			expect(t, e.req("POST", "/v1/batches", e.keyA, batch), 201, "")
			if n := e.countJobs(); n != 3 {
				t.Fatalf("%d jobs in the store, want 3 (the keyed job, two created by the batch)", n)
			}
			body := string(e.req("GET", "/metrics", "", nil).body)
			for _, want := range []string{
				`idem_jobs_enqueued_total{kind="k",queue="dq"} 3`,
				`idem_jobs_deduplicated_total{kind="k",queue="dq"} 2`,
			} {
				if !strings.Contains(body, want+"\n") {
					t.Fatalf("metrics lack %s:\n%s", want, grepLines(body, `queue="dq"`))
				}
			}
		})
	}
}
