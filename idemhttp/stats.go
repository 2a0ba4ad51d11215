package idemhttp

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/quantile"
	"github.com/idem-dev/idem/store"
)

// latencySample is how many recent completed jobs per queue give the wait
// and run percentiles of /v1/stats.
const latencySample = 200

// stateCounts renders counts per state as the API shows them: every
// state, 0 where counts has none.
func stateCounts[N int | int64](counts map[idemtype.JobState]N) map[string]int64 {
	out := make(map[string]int64, len(idemtype.AllStates))
	for _, st := range idemtype.AllStates {
		out[string(st)] = int64(counts[st])
	}
	return out
}

// queueStats renders the counts and rates of one queue (without latencies).
func queueStats(st *store.QueueStat, now time.Time) *wire.QueueStats {
	q := &wire.QueueStats{Counts: stateCounts(st.Counts), Completed1m: st.Completed1m, Failed1m: st.Failed1m,
		DeadUnresolved: st.DeadUnresolved}
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
	// tenant "" (the admin's all_tenants view) reads every tenant's jobs,
	// as QueueStats("") counts them.
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

// pct returns the percentiles of v (sorted in place) by nearest rank, as
// the delivery latencies of idem.Client.TargetStats (internal/quantile);
// a negative value (clocks apart) counts as 0.
func pct(v []float64) wire.Percentiles {
	p50, p95, p99 := quantile.P50P95P99(v)
	return wire.Percentiles{P50: math.Max(0, p50), P95: math.Max(0, p95), P99: math.Max(0, p99)}
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) error {
	tenant, ok := statsTenant(w, r)
	if !ok {
		return nil
	}
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
	cs, err := s.cacheStatsOf(r.Context(), tenant)
	if err != nil {
		return err
	}
	limits, err := s.visibleLimits(r)
	if err != nil {
		return err
	}
	paused, err := s.pausedScopes(r)
	if err != nil {
		return err
	}
	kinds, err := s.kindStats(r.Context(), tenant)
	if err != nil {
		return err
	}
	targets, byTenant, err := s.targetStats(r.Context(), tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Stats{Queues: queues, Idempotency: cs, Targets: targets,
		TargetsByTenant: byTenant, Limits: limits, Paused: paused, Kinds: kinds})
	return nil
}

// targetStats renders the per-target delivery statistics of tenant: its
// targets by name (own), or for tenant "" (the admin's all_tenants view)
// every tenant's by tenant and name (byTenant), as targets are per tenant
// and two tenants' targets may share a name. Both are nil when no target
// had attempts.
func (s *Server) targetStats(ctx context.Context, tenant string) (own map[string]*wire.TargetStats,
	byTenant map[string]map[string]*wire.TargetStats, err error) {
	list, err := s.client.TargetStats(ctx, &idem.TargetStatsOpts{Tenant: tenant, AllTenants: tenant == ""})
	if err != nil || len(list) == 0 {
		return nil, nil, err
	}
	if tenant != "" {
		own = make(map[string]*wire.TargetStats, len(list))
		for _, t := range list {
			own[t.Target] = renderTargetStats(t)
		}
		return own, nil, nil
	}
	byTenant = map[string]map[string]*wire.TargetStats{}
	for _, t := range list {
		if byTenant[t.Tenant] == nil {
			byTenant[t.Tenant] = map[string]*wire.TargetStats{}
		}
		byTenant[t.Tenant][t.Target] = renderTargetStats(t)
	}
	return nil, byTenant, nil
}

// renderTargetStats is the wire form of one target's statistics.
func renderTargetStats(t *idem.TargetStat) *wire.TargetStats {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	st := &wire.TargetStats{Attempts: t.Attempts, Completed: t.Completed, Retried: t.Retried, Dead: t.Dead,
		SuccessRate: t.SuccessRate, LatencyMS: wire.Percentiles{P50: ms(t.P50), P95: ms(t.P95), P99: ms(t.P99)},
		Statuses: make(map[string]int, len(t.Statuses))}
	for code, n := range t.Statuses {
		st.Statuses[strconv.Itoa(code)] = n
	}
	return st
}
