package idemhttp

import "testing"

// TestStatsPercentilesNearestRank: the wait and run percentiles of
// /v1/stats are the nearest rank, as the delivery latencies of
// TargetStats are: over 1..100 ms p50 is 50 ms, p95 95 ms, p99 99 ms;
// over {10, 20} ms p50 is 10 ms.
func TestStatsPercentilesNearestRank(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(100 - i) // unsorted
	}
	if got := pct(v); got.P50 != 50 || got.P95 != 95 || got.P99 != 99 {
		t.Errorf("1..100 ms: %+v, want p50 50, p95 95, p99 99", got)
	}
	if got := pct([]float64{20, 10}); got.P50 != 10 || got.P95 != 20 || got.P99 != 20 {
		t.Errorf("{10, 20} ms: %+v, want p50 10, p95 20, p99 20", got)
	}
}
