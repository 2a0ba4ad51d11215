package idemhttp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/store"
)

// KindStats summarises the jobs of one kind created in the last 24 hours
// (seed 004's job health summary, seed 002's stats by action and status),
// counted over every such job by one aggregate query (store.JobKindStats).
type KindStats = wire.KindStats

// statsTenant is the tenant /v1/stats reports: the request's, or every
// tenant ("") for an admin key with ?all_tenants=true; ok is false (and a
// problem written) when a tenant key asks for every tenant (403) or
// all_tenants is other than one true or false (400: "yes" was taken for
// false).
func statsTenant(w http.ResponseWriter, r *http.Request) (tenant string, ok bool) {
	q := r.URL.Query()
	if err := queryOnce(q, "all_tenants"); err != nil {
		writeProblem(w, problemFor(err))
		return "", false
	}
	if v := q.Get("all_tenants"); q.Has("all_tenants") && v != "true" && v != "false" {
		writeProblem(w, invalid("all_tenants", "must be true or false"))
		return "", false
	}
	if q.Get("all_tenants") != "true" {
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

// kindStats24h returns the store's summary of every job of tenant ("" =
// every tenant) created in the last 24 hours, one entry per kind.
func (s *Server) kindStats24h(ctx context.Context, tenant string) ([]*store.JobKindStat, error) {
	ks, err := s.store.JobKindStats(ctx, &store.JobKindStatsParams{Tenant: tenant, Since: s.now().Add(-24 * time.Hour)})
	if err != nil {
		return nil, fmt.Errorf("kind stats: %w", err)
	}
	return ks, nil
}

// kindStats builds the per-kind summary of tenant ("" = every tenant).
func (s *Server) kindStats(ctx context.Context, tenant string) (map[string]*KindStats, error) {
	ks, err := s.kindStats24h(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*KindStats, len(ks))
	for _, k := range ks {
		out[k.Kind] = &KindStats{Count: k.Count, States: stateCounts(k.States), AvgDurationMS: k.AvgDurationMS,
			MaxDurationMS: k.MaxDurationMS, Retried: k.Retried, Failed24h: k.Failed}
	}
	return out, nil
}
