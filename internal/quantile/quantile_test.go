package quantile

import (
	"testing"
	"time"
)

// TestNearestRank: the ceil(p·n/100)-th smallest value, whatever the
// order it is given in: over 1..100 p50 is 50, p95 95, p99 99; over 1..10
// p95 and p99 are 10; over {10, 20} p50 is 10; over one value every
// percentile is it; over none, zero.
func TestNearestRank(t *testing.T) {
	seq := func(n int) []int {
		v := make([]int, n)
		for i := range v {
			v[i] = n - i // descending: P50P95P99 sorts
		}
		return v
	}
	for _, c := range []struct {
		name          string
		v             []int
		p50, p95, p99 int
	}{
		{"1..100", seq(100), 50, 95, 99},
		{"1..10", seq(10), 5, 10, 10},
		{"1..1000", seq(1000), 500, 950, 990},
		{"{10, 20}", []int{20, 10}, 10, 20, 20},
		{"one", []int{7}, 7, 7, 7},
		{"none", nil, 0, 0, 0},
	} {
		if p50, p95, p99 := P50P95P99(c.v); p50 != c.p50 || p95 != c.p95 || p99 != c.p99 {
			t.Errorf("%s: p50 %d p95 %d p99 %d, want %d %d %d", c.name, p50, p95, p99, c.p50, c.p95, c.p99)
		}
	}
}

// TestNearestRankDurations: TargetStats' latencies are durations; over
// {10, 20} ms p50 is 10 ms.
func TestNearestRankDurations(t *testing.T) {
	if p50, _, p99 := P50P95P99([]time.Duration{20 * time.Millisecond, 10 * time.Millisecond}); p50 != 10*time.Millisecond || p99 != 20*time.Millisecond {
		t.Errorf("{10, 20} ms: p50 %v p99 %v, want 10ms 20ms", p50, p99)
	}
}
