package idemhttp

import (
	"context"
	"net/http"
	"time"

	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// KindStats summarises the jobs of one kind created in the last 24 hours
// (seed 004's job health summary), from the newest kindSample jobs.
type KindStats = wire.KindStats

// kindSample is how many of the newest jobs the kind summary reads.
const kindSample = 500

// statsTenant is the tenant /v1/stats reports: the request's, or every
// tenant ("") for an admin key with ?all_tenants=true; ok is false (and a
// 403 written) when a tenant key asks for every tenant.
func statsTenant(w http.ResponseWriter, r *http.Request) (tenant string, ok bool) {
	if r.URL.Query().Get("all_tenants") != "true" {
		return tenantOf(r), true
	}
	if !isAdmin(r) {
		writeProblem(w, newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden", "all_tenants needs an admin key"))
		return "", false
	}
	return "", true
}

// cacheStatsOf is the summary of the idempotency records of tenant: the
// idempotency section of /v1/stats and the reply of GET /v1/idempotency.
func (s *Server) cacheStatsOf(ctx context.Context, tenant string) (*wire.CacheStats, error) {
	cs, err := s.client.CacheStats(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if err := s.persistedCache(ctx, tenant, cs); err != nil {
		return nil, err
	}
	return &wire.CacheStats{Entries: cs.Entries, InProgress: cs.InProgress, Completed: cs.Completed, Failed: cs.Failed,
		Expiring24h: cs.Expiring24h, Expired: cs.Expired, SizeBytes: cs.SizeBytes, Hits: cs.Hits, Misses: cs.Misses,
		HitRate: cs.HitRate}, nil
}

// kindStats builds the per-kind summary of tenant ("" = every tenant).
func (s *Server) kindStats(ctx context.Context, tenant string) (map[string]*KindStats, error) {
	now := s.now()
	jobs, _, err := s.store.JobList(ctx, &store.JobListParams{Limit: kindSample,
		Filter: store.JobFilter{Tenant: tenant, Since: now.Add(-24 * time.Hour)}})
	if err != nil {
		return nil, err
	}
	out := map[string]*KindStats{}
	runs := map[string]int64{}
	for _, j := range jobs {
		k := out[j.Kind]
		if k == nil {
			k = &KindStats{}
			out[j.Kind] = k
		}
		k.Count++
		if j.Attempt > 1 || j.State == idemtype.StateRetryable {
			k.Retried++
		}
		if j.State == idemtype.StateRetryable || j.State == idemtype.StateDead {
			k.Failed24h++
		}
		if j.State == idemtype.StateCompleted && !j.WasCached && j.StartedAt != nil && j.FinishedAt != nil {
			ms := float64(j.FinishedAt.Sub(*j.StartedAt).Microseconds()) / 1000
			k.AvgDurationMS += ms // a sum until divided below
			k.MaxDurationMS = max(k.MaxDurationMS, ms)
			runs[j.Kind]++
		}
	}
	for kind, k := range out {
		if n := runs[kind]; n > 0 {
			k.AvgDurationMS /= float64(n)
		}
	}
	return out, nil
}
