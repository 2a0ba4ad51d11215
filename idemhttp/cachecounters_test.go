package idemhttp_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestCacheCountersSharedAcrossNodes: hits and misses counted by one node
// are what another node (and a restarted one) reports in /v1/idempotency
// and /v1/stats, because they live in the database.
func TestCacheCountersSharedAcrossNodes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	openShared := func(t *testing.T) store.Store {
		st, err := sqlitestore.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st1 := openShared(t)
	counts := idemhttp.NewCacheCounters(st1.(store.Counters), 0, nil)
	counts.Start(context.Background())
	node1 := setup(t, func(*testing.T) store.Store { return st1 }, &setupOpts{clientCfg: &idem.Config{DisableMaintenance: true, Observer: counts}})
	id := node1.enqueue(node1.keyA, map[string]any{"kind": "k", "queue": "c", "idempotency_key": "x"})
	j := node1.claim(node1.keyA, "c") // a miss
	expect(t, node1.req("POST", "/v1/jobs/"+id+"/complete", node1.keyA, map[string]any{"lease_token": j["lease_token"], "result": 1}), 200, "")
	if err := counts.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	node2 := setup(t, openShared, nil) // another process on the same file, counting nothing itself
	r := node2.req("GET", "/v1/idempotency", node2.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["misses"] != float64(1) {
		t.Fatalf("node 2 sees %s", r.body)
	}
	r = node2.req("GET", "/v1/idempotency", node2.keyB, nil)
	if m := r.json(t); m["misses"] != float64(0) {
		t.Fatalf("tenant b sees tenant a's counts: %s", r.body)
	}
}
