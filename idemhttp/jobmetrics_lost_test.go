package idemhttp_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// lostFinishStore is a real store whose JobFinishMany, while lose is set,
// writes and then answers an error, as a PostgreSQL commit whose answer
// the network lost (failure injection around the real store: the write
// itself is real).
type lostFinishStore struct {
	store.Store
	lose atomic.Bool
}

func (l *lostFinishStore) JobFinishMany(ctx context.Context, ps []*store.JobFinishParams) ([]error, error) {
	errs, err := l.Store.JobFinishMany(ctx, ps)
	if err == nil && l.lose.Load() {
		return nil, errors.New("unexpected EOF")
	}
	return errs, err
}

// lostFinishServer is a server with job metrics on a lostFinishStore
// around the store of open (the PostgreSQL one when name is "postgres").
func lostFinishServer(t *testing.T, name string, open opener) (*env, *lostFinishStore) {
	t.Helper()
	if name == "postgres" {
		dbtest.PostgresURL(t) // skips loudly without a server
	}
	lf := &lostFinishStore{}
	m := idemhttp.NewJobMetrics(0)
	e := setup(t, func(t *testing.T) store.Store { lf.Store = open(t); return lf },
		&setupOpts{clientCfg: &idem.Config{DisableMaintenance: true, Observer: m}})
	if err := e.server.Registry().Register(m); err != nil {
		t.Fatal(err)
	}
	return e, lf
}

// TestJobMetricsLostFinishAnswerCounted: a pull worker's completion or
// failure whose write committed but whose answer was lost (the request
// answered an error) is counted once: not at the error, and not at the
// worker's retry either (a repeat, answered 200, counted by the request it repeats),
// it was never counted at all. On both stores.
func TestJobMetricsLostFinishAnswerCounted(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, lf := lostFinishServer(t, name, open)
			id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "lq"})
			j := e.claim(e.keyA, "lq")
			id2 := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "lq", "max_attempts": 1})
			j2 := e.claim(e.keyA, "lq")
			lf.lose.Store(true)
			complete := map[string]any{"lease_token": j["lease_token"], "result": map[string]any{"a": 1}}
			fail := map[string]any{"lease_token": j2["lease_token"], "error": "boom"}
			if r := e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, complete); r.status < 500 {
				t.Fatalf("complete with its answer lost: %d %s, want a server error", r.status, r.body)
			}
			if r := e.req("POST", "/v1/jobs/"+id2+"/fail", e.keyA, fail); r.status < 500 {
				t.Fatalf("fail with its answer lost: %d %s, want a server error", r.status, r.body)
			}
			lf.lose.Store(false)
			expect(t, e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, complete), 200, "")
			// A failure's retry is a repeat too (200), and counts nothing.
			expect(t, e.req("POST", "/v1/jobs/"+id2+"/fail", e.keyA, fail), 200, "")
			body := string(e.req("GET", "/metrics", "", nil).body)
			for _, want := range []string{
				`idem_jobs_completed_total{kind="k",queue="lq"} 1`,
				`idem_jobs_failed_total{kind="k",queue="lq"} 1`,
				`idem_jobs_dead_total{kind="k",queue="lq"} 1`,
				`idem_job_run_seconds_count{kind="k",queue="lq"} 2`,
			} {
				if !strings.Contains(body, want+"\n") {
					t.Fatalf("metrics lack %s:\n%s", want, grepLines(body, `queue="lq"`))
				}
			}
		})
	}
}

// TestJobMetricsLostSettleAnswerCounted: a pull claim that answers a keyed
// job from the cache writes its cached finish itself; when that write
// committed but its answer was lost (the claim answered an error), the
// job's claim, cache hit and completion are counted once all the same: no
// later claim sees the job again to count them. On both stores.
func TestJobMetricsLostSettleAnswerCounted(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, lf := lostFinishServer(t, name, open)
			// Window 0: the key takes a new job once the first finished,
			// and that job is answered from the first one's result.
			job := map[string]any{"kind": "k", "queue": "sq", "idempotency_key": "ks", "dedup_window": "0s"}
			e.enqueue(e.keyA, job)
			e.complete(e.keyA, e.claim(e.keyA, "sq"), map[string]any{"a": 1})
			second := e.enqueue(e.keyA, job)
			lf.lose.Store(true)
			r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"sq"}, "worker_id": "w1", "lease": "30s"})
			if r.status < 500 {
				t.Fatalf("claim with its settle's answer lost: %d %s, want a server error", r.status, r.body)
			}
			lf.lose.Store(false)
			e.claimNone(e.keyA, "sq")
			if got := e.req("GET", "/v1/jobs/"+second, e.keyA, nil).job(t); got["state"] != "completed" || got["was_cached"] != true {
				t.Fatalf("second job: %v, want completed from the cache", got)
			}
			body := string(e.req("GET", "/metrics", "", nil).body)
			for _, want := range []string{
				`idem_jobs_claimed_total{kind="k",queue="sq"} 2`,
				`idem_cache_hits_total{kind="k",queue="sq"} 1`,
				`idem_jobs_completed_total{kind="k",queue="sq"} 2`,
			} {
				if !strings.Contains(body, want+"\n") {
					t.Fatalf("metrics lack %s:\n%s", want, grepLines(body, `queue="sq"`))
				}
			}
		})
	}
}
