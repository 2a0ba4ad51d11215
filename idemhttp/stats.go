package idemhttp

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// latencySample is how many recent completed jobs per queue give the wait
// and run percentiles of /v1/stats.
const latencySample = 200

// queueStats renders the counts and rates of one queue (without latencies).
func queueStats(st *store.QueueStat, now time.Time) *wire.QueueStats {
	q := &wire.QueueStats{Counts: map[string]int64{}, Completed1m: st.Completed1m, Failed1m: st.Failed1m}
	for _, state := range idemtype.AllStates {
		q.Counts[string(state)] = st.Counts[state]
	}
	if st.OldestAvailable != nil {
		q.OldestAvailableAgeS = math.Max(0, now.Sub(*st.OldestAvailable).Seconds())
	}
	if total := st.Completed1m + st.Failed1m; total > 0 {
		rate := float64(st.Completed1m) / float64(total)
		q.SuccessRate = &rate
	}
	return q
}

// latencyWindow is how far back the wait and run percentiles look.
const latencyWindow = time.Hour

// latencies fills the wait and run percentiles of every queue from its
// latest latencySample jobs completed within latencyWindow: one store
// query whatever the number of queues.
func (s *Server) latencies(ctx context.Context, tenant string, now time.Time, queues map[string]*wire.QueueStats) error {
	if tenant == "" {
		tenant = idem.DefaultTenant // as the client scopes QueueStats
	}
	list, err := s.store.JobDurations(ctx, &store.JobDurationsParams{Tenant: tenant,
		Since: now.Add(-latencyWindow), PerQueue: latencySample})
	if err != nil {
		return err
	}
	wait, run := map[string][]float64{}, map[string][]float64{}
	for _, d := range list {
		wait[d.Queue] = append(wait[d.Queue], float64(d.StartedAt.Sub(d.RunAt).Microseconds())/1000)
		run[d.Queue] = append(run[d.Queue], float64(d.FinishedAt.Sub(d.StartedAt).Microseconds())/1000)
	}
	for name, q := range queues {
		q.WaitMS, q.RunMS = pct(wait[name]), pct(run[name])
	}
	return nil
}

func pct(v []float64) wire.Percentiles {
	if len(v) == 0 {
		return wire.Percentiles{}
	}
	slices.Sort(v)
	at := func(p float64) float64 { return math.Max(0, v[min(len(v)-1, int(p*float64(len(v))))]) }
	return wire.Percentiles{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r)
	now := s.now()
	list, err := s.client.QueueStats(r.Context(), tenant)
	if err != nil {
		return err
	}
	queues := map[string]*wire.QueueStats{}
	for _, st := range list {
		queues[st.Queue] = queueStats(st, now)
	}
	if err := s.latencies(r.Context(), tenant, now, queues); err != nil {
		return err
	}
	cs, err := s.cacheStats(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Stats{Queues: queues, Idempotency: cs})
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// check is one readiness check.
type check struct {
	Status    string  `json:"status"` // healthy, degraded or unhealthy
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Detail    string  `json:"detail,omitempty"`
}

// readiness evaluates the thresholds over every tenant.
func (s *Server) readiness(ctx context.Context) (status string, checks map[string]check) {
	checks = map[string]check{}
	list, err := s.store.QueueStats(ctx, &store.QueueStatsParams{Tenant: "", Now: s.now()})
	if err != nil {
		checks["database"] = check{Status: "unhealthy", Detail: "the store did not answer"}
		return "unhealthy", checks
	}
	checks["database"] = check{Status: "healthy"}
	var dead, avail, done, failed int64
	var oldest time.Duration
	for _, q := range list {
		dead += q.Counts[idemtype.StateDead]
		avail += q.Counts[idemtype.StateAvailable]
		done += q.Completed1m
		failed += q.Failed1m
		if q.OldestAvailable != nil {
			oldest = max(oldest, s.now().Sub(*q.OldestAvailable))
		}
	}
	rc := s.cfg.Ready
	grade := func(bad bool, level string) string {
		if bad {
			return level
		}
		return "healthy"
	}
	checks["dead_jobs"] = check{Status: grade(dead > rc.DeadJobs, "unhealthy"), Value: float64(dead), Threshold: float64(rc.DeadJobs)}
	checks["available_jobs"] = check{Status: grade(avail > rc.AvailableJobs, "degraded"), Value: float64(avail), Threshold: float64(rc.AvailableJobs)}
	checks["oldest_available_s"] = check{Status: grade(oldest > rc.OldestAvailable, "degraded"),
		Value: oldest.Seconds(), Threshold: rc.OldestAvailable.Seconds()}
	rate := 1.0
	if done+failed > 0 {
		rate = float64(done) / float64(done+failed)
	}
	checks["success_rate_1m"] = check{Status: grade(rate < rc.SuccessRate, "degraded"), Value: rate, Threshold: rc.SuccessRate,
		Detail: fmt.Sprintf("%d completed, %d failed in the last minute", done, failed)}
	status = "healthy"
	for _, c := range checks {
		switch {
		case c.Status == "unhealthy":
			status = "unhealthy"
		case c.Status == "degraded" && status == "healthy":
			status = "degraded"
		}
	}
	return status, checks
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	status, checks := s.readiness(r.Context())
	code := http.StatusOK
	if status == "unhealthy" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "checks": checks})
	return nil
}
