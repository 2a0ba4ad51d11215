package idemhttp_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

// TestJobMetricsRepeatedCompleteCountedOnce: a pull worker repeating its
// completion (a retry after a lost answer: accepted, 200, nothing
// written), one after the other or all at once, counts one completed
// attempt and one run per job, on both stores.
func TestJobMetricsRepeatedCompleteCountedOnce(t *testing.T) {
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
			id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
			j := e.claim(e.keyA, "q")
			for range 3 {
				r := e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA,
					map[string]any{"lease_token": j["lease_token"], "result": map[string]any{"a": 1}})
				expect(t, r, 200, "")
			}
			// The same completion sent four times at once.
			id2 := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
			j2 := e.claim(e.keyA, "q")
			body := `{"lease_token":"` + j2["lease_token"].(string) + `","result":{"b":2}}`
			codes := make([]int, 4)
			var wg sync.WaitGroup
			for i := range codes {
				wg.Go(func() {
					req, _ := http.NewRequest("POST", e.srv.URL+"/v1/jobs/"+id2+"/complete", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+e.keyA)
					req.Header.Set("Content-Type", "application/json")
					if res, err := e.srv.Client().Do(req); err == nil {
						codes[i] = res.StatusCode
						res.Body.Close()
					}
				})
			}
			wg.Wait()
			for _, c := range codes {
				if c != 200 {
					t.Fatalf("concurrent repeats answered %v, want 200 each", codes)
				}
			}
			metrics := string(e.req("GET", "/metrics", "", nil).body)
			for _, want := range []string{
				`idem_jobs_completed_total{kind="k",queue="q"} 2`,
				`idem_job_run_seconds_count{kind="k",queue="q"} 2`,
			} {
				if !strings.Contains(metrics, want+"\n") {
					t.Fatalf("after two jobs' completions sent three and four times, metrics lack %s:\n%s", want,
						grepLines(metrics, `queue="q"`))
				}
			}
		})
	}
}
