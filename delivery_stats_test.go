package idem

import (
	"testing"
	"time"
)

// TestPercentilesNearestRank: percentiles documents nearest rank
// (the ceil(p·n)-th smallest value); over 1..100 ms p50 is 50 ms, p95
// 95 ms, p99 99 ms, and over {10, 20} ms p50 is 10 ms.
func TestPercentilesNearestRank(t *testing.T) {
	v := make([]time.Duration, 100)
	for i := range v {
		v[i] = time.Duration(i+1) * time.Millisecond
	}
	p50, p95, p99 := percentiles(v)
	if p50 != 50*time.Millisecond || p95 != 95*time.Millisecond || p99 != 99*time.Millisecond {
		t.Errorf("1..100 ms: p50 %v p95 %v p99 %v, want 50ms 95ms 99ms", p50, p95, p99)
	}
	if p50, _, _ := percentiles([]time.Duration{10 * time.Millisecond, 20 * time.Millisecond}); p50 != 10*time.Millisecond {
		t.Errorf("{10, 20} ms: p50 %v, want 10ms", p50)
	}
}
