// Package quantile is the one percentile rule of idem's statistics: the
// delivery latencies of idem.Client.TargetStats and the wait and run
// percentiles of GET /v1/stats pick their samples the same way.
package quantile

import (
	"cmp"
	"slices"
)

// NearestRank returns the pct-th percentile (0 < pct <= 100) of sorted by
// nearest rank: its ceil(pct·n/100)-th smallest value (computed in integers,
// so no rounding of pct/100 moves the rank). It returns the zero value for
// an empty slice.
func NearestRank[T cmp.Ordered](sorted []T, pct int) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	return sorted[min(len(sorted)-1, max(0, (pct*len(sorted)+99)/100-1))]
}

// P50P95P99 sorts v in place and returns its 50th, 95th and 99th
// percentiles (NearestRank).
func P50P95P99[T cmp.Ordered](v []T) (p50, p95, p99 T) {
	slices.Sort(v)
	return NearestRank(v, 50), NearestRank(v, 95), NearestRank(v, 99)
}
