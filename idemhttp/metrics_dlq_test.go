package idemhttp_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// TestMetricsDLQUnresolved: /metrics has idem_dlq_unresolved{queue}, the
// dead jobs not marked resolved (what operators alert on), apart from
// idem_jobs{state="dead"}, which counts the resolved ones too; past
// MetricsMaxQueues the rest are summed under "other".
func TestMetricsDLQUnresolved(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open, &setupOpts{serverCfg: &idemhttp.Config{MetricsCacheTTL: time.Nanosecond, MetricsMaxQueues: 1}})
			resolved := e.dead(e.keyA, "mail")
			e.dead(e.keyA, "mail")
			e.dead(e.keyB, "mail")
			e.dead(e.keyA, "small")
			expect(t, e.req("POST", "/v1/dlq/"+resolved+"/resolve", e.keyA, map[string]any{"note": "sent by hand"}), 200, "")
			r := e.req("GET", "/metrics", "", nil)
			expect(t, r, 200, "")
			for _, want := range []string{
				`idem_jobs\{queue="mail",state="dead"\} 3\n`,
				`idem_dlq_unresolved\{queue="mail"\} 2\n`,
				`idem_dlq_unresolved\{queue="other"\} 1\n`,
			} {
				if !regexp.MustCompile(want).Match(r.body) {
					t.Errorf("no %s in:\n%s", want, r.body)
				}
			}
		})
	}
}
