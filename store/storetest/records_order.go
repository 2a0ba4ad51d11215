package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// testAcquireManyOppositeOrders: batches naming the same keys in opposite
// orders, acquired at once (two claim batches of one tenant's keyed jobs),
// never wait on each other in a cycle: every batch succeeds and every key
// is acquired by exactly one of them. A store that locked keys in the
// order given would deadlock (PostgreSQL then aborts one transaction).
func testAcquireManyOppositeOrders(t *testing.T, s store.Store) {
	const rounds, keys = 20, 40
	for r := range rounds {
		now := at(time.Duration(r) * time.Second)
		fwd := make([]*store.RecordAcquireParams, keys)
		rev := make([]*store.RecordAcquireParams, keys)
		for i := range keys {
			k := fmt.Sprintf("r%d-k%02d", r, i)
			fwd[i] = acq(k, "fwd", now)
			rev[keys-1-i] = acq(k, "rev", now)
		}
		var wg sync.WaitGroup
		res := make([][]*store.RecordAcquireResult, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for b, batch := range [][]*store.RecordAcquireParams{fwd, rev} {
			wg.Go(func() {
				<-start
				res[b], errs[b] = s.RecordAcquireMany(t.Context(), batch)
			})
		}
		close(start)
		wg.Wait()
		for b, err := range errs {
			if err != nil {
				t.Fatalf("round %d: batch %d failed: %v", r, b, err)
			}
		}
		for i := range keys {
			f, v := res[0][i], res[1][keys-1-i] // the same key
			if f.Acquired == v.Acquired {
				t.Fatalf("round %d key %d: acquired by fwd %v and by rev %v, want exactly one", r, i, f.Acquired, v.Acquired)
			}
		}
	}
}
