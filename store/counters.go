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
	// CounterAdd adds each delta of deltas (name → delta) to the counters
	// of tenant, creating missing ones at zero, in one transaction.
	CounterAdd(ctx context.Context, tenant string, deltas map[string]int64) error
	// CounterGet returns the counters of tenant ("" = summed over every
	// tenant); a counter never added to is absent.
	CounterGet(ctx context.Context, tenant string) (map[string]int64, error)
}
