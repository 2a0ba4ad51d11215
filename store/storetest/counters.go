package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/idem-dev/idem/store"
)

// counterCases test store.Counters.
func counterCases() []testCase {
	return []testCase{
		{"Counters/AddCreatesAndAccumulatesPerTenant", func(t *testing.T, s store.Store) {
			c := counters(t, s)
			ctx := context.Background()
			if got, err := c.CounterGet(ctx, &store.CounterGetParams{Tenant: "a"}); err != nil || len(got) != 0 {
				t.Fatalf("empty: %v %v", got, err)
			}
			must(t, c.CounterAdd(ctx, &store.CounterAddParams{Tenant: "a", Deltas: map[string]int64{store.CounterCacheHits: 2, store.CounterCacheMisses: 1}}))
			must(t, c.CounterAdd(ctx, &store.CounterAddParams{Tenant: "a", Deltas: map[string]int64{store.CounterCacheHits: 3}}))
			must(t, c.CounterAdd(ctx, &store.CounterAddParams{Tenant: "b", Deltas: map[string]int64{store.CounterCacheHits: 10}}))
			must(t, c.CounterAdd(ctx, &store.CounterAddParams{Tenant: "b"}))
			a, err := c.CounterGet(ctx, &store.CounterGetParams{Tenant: "a"})
			if err != nil || a[store.CounterCacheHits] != 5 || a[store.CounterCacheMisses] != 1 {
				t.Fatalf("tenant a: %v %v", a, err)
			}
			all, err := c.CounterGet(ctx, &store.CounterGetParams{})
			if err != nil || all[store.CounterCacheHits] != 15 || all[store.CounterCacheMisses] != 1 || len(all) != 2 {
				t.Fatalf("all tenants: %v %v", all, err)
			}
		}},
		{"Counters/ConcurrentAddsAreNotLost", func(t *testing.T, s store.Store) {
			c := counters(t, s)
			ctx := context.Background()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 5 {
						if err := c.CounterAdd(ctx, &store.CounterAddParams{Tenant: "t", Deltas: map[string]int64{store.CounterCacheMisses: 1, store.CounterCacheHits: 2}}); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			got, err := c.CounterGet(ctx, &store.CounterGetParams{Tenant: "t"})
			if err != nil || got[store.CounterCacheMisses] != 40 || got[store.CounterCacheHits] != 80 {
				t.Fatalf("after concurrent adds: %v %v", got, err)
			}
		}},
	}
}

// counters returns s as store.Counters; every backend implements it.
func counters(t *testing.T, s store.Store) store.Counters {
	t.Helper()
	c, ok := s.(store.Counters)
	if !ok {
		t.Fatalf("%T does not implement store.Counters", s)
	}
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
