package idemhttp_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/store"
)

// statsCountingStore is a real store that counts its QueueStats calls.
type statsCountingStore struct {
	store.Store
	stats atomic.Int32
}

func (s *statsCountingStore) QueueStats(ctx context.Context, p *store.QueueStatsParams) ([]*store.QueueStat, error) {
	s.stats.Add(1)
	return s.Store.QueueStats(ctx, p)
}

// TestReadyzNoStats: the readiness probe proves the store answers with a
// cheap round trip, not a count of every job (QueueStats) on each probe;
// it still reports the database check healthy, and unhealthy once the
// store is closed.
func TestReadyzNoStats(t *testing.T) {
	t.Parallel()
	cs := &statsCountingStore{}
	e := setup(t, func(t *testing.T) store.Store { cs.Store = openSQLite(t); return cs }, nil)
	r := e.req("GET", "/readyz", "", nil)
	expect(t, r, 200, "")
	if db := r.json(t)["checks"].(map[string]any)["database"].(map[string]any); db["status"] != "healthy" {
		t.Fatalf("readyz %s", r.body)
	}
	if n := cs.stats.Load(); n != 0 {
		t.Fatalf("readyz called QueueStats %d times; want a cheap ping", n)
	}
	e.st.Close()
	r = e.req("GET", "/readyz", "", nil)
	expect(t, r, 503, "")
	if db := r.json(t)["checks"].(map[string]any)["database"].(map[string]any); db["status"] != "unhealthy" {
		t.Fatalf("readyz of a closed store %s; want the database check unhealthy", r.body)
	}
}
