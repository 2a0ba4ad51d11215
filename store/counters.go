package store

import "context"

// Names of the counters the engine keeps in the store (seed 000: cache
// hit rates that every node and restart agree on).
const (
	CounterCacheHits   = "cache_hits"
	CounterCacheMisses = "cache_misses"
)

// Counters is a store's named, per-tenant counters: monotonic totals that
// several nodes add to. It is part of the seam for every backend (the
// conformance suite checks it) and kept as its own interface so callers
// can ask for it alone.
type Counters interface {
	// CounterAdd adds each delta of p.Deltas (name → delta) to the
	// counters of p.Tenant, creating missing ones at zero, in one
	// transaction.
	CounterAdd(ctx context.Context, p *CounterAddParams) error
	// CounterGet returns the counters of p.Tenant ("" = summed over every
	// tenant); a counter never added to is absent.
	CounterGet(ctx context.Context, p *CounterGetParams) (map[string]int64, error)
}

// CounterAddParams is what CounterAdd adds.
type CounterAddParams struct {
	Tenant string
	Deltas map[string]int64 // name → delta; empty = nothing to do
}

// CounterGetParams selects the counters CounterGet returns.
type CounterGetParams struct {
	Tenant string // "" = summed over every tenant
}
