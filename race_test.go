package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// bothBundles runs fn on the bundle of a fresh SQLite store (setup) and on
// that of a fresh PostgreSQL schema (pgSetup), as parallel subtests "sqlite"
// and "postgres", each with the configuration cfg returns.
func bothBundles(t *testing.T, cfg func() *idem.Config, fn func(t *testing.T, b *bundle)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, setup(t, cfg()))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		b, _, _ := pgSetup(t, cfg())
		fn(t, b)
	})
}

// bothStores is bothBundles for a test of the client alone.
func bothStores(t *testing.T, cfg func() *idem.Config, fn func(t *testing.T, c *idem.Client)) {
	t.Helper()
	bothBundles(t, cfg, func(t *testing.T, b *bundle) { fn(t, b.client) })
}

// startTogether runs fn(g) on n goroutines released together by one
// channel and waits for all of them.
func startTogether(n int, fn func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Go(func() {
			<-start
			fn(g)
		})
	}
	close(start)
	wg.Wait()
}

// TestPublishKeyRace (both stores): 16 publishers publish the same 10
// keyed events, each in its own order, to a topic with three
// subscriptions. Overlap: the publishers start together on a channel.
// Each key makes one event (one publish of it is not Existing, every
// publish returns that event and 3 deliveries), and each (event,
// subscription) has exactly one delivery job: 30 jobs in all.
func TestPublishKeyRace(t *testing.T) {
	t.Parallel()
	bothStores(t, func() *idem.Config { return &idem.Config{} }, func(t *testing.T, c *idem.Client) {
		const publishers, keys, subs = 16, 10, 3
		ctx := t.Context()
		for i := range subs {
			// Nothing delivers (the client is not started): the URL is never called.
			if _, err := c.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: fmt.Sprint("s", i),
				URL: "http://127.0.0.1:9/never"}); err != nil {
				t.Fatal(err)
			}
		}
		var (
			mu      sync.Mutex
			events  = map[string]map[int64]bool{}
			created = map[string]int{}
		)
		startTogether(publishers, func(g int) {
			for i := range keys {
				key := fmt.Sprint("e", (g*3+i)%keys)
				res, err := c.Publish(ctx, &idem.Event{Topic: "orders", Key: key, Type: "paid",
					Payload: json.RawMessage(`{"n":1}`)})
				if err != nil {
					t.Errorf("publisher %d, %s: %v", g, key, err)
					return
				}
				if res.Deliveries != subs {
					t.Errorf("publisher %d, %s: %d deliveries, want %d", g, key, res.Deliveries, subs)
				}
				mu.Lock()
				if events[key] == nil {
					events[key] = map[int64]bool{}
				}
				events[key][res.Event.ID] = true
				if !res.Existing {
					created[key]++
				}
				mu.Unlock()
			}
		})
		if t.Failed() {
			return
		}
		for i := range keys {
			key := fmt.Sprint("e", i)
			if created[key] != 1 || len(events[key]) != 1 {
				t.Errorf("key %s: created %d times, %d events: want 1 and 1", key, created[key], len(events[key]))
			}
		}
		jobs, _, err := c.JobList(ctx, &idem.JobListParams{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		perKey := map[string]int{}
		for _, j := range jobs {
			perKey[j.IdempotencyKey]++
		}
		if len(jobs) != keys*subs || len(perKey) != keys*subs {
			t.Errorf("%d delivery jobs with %d distinct keys, want %d and %d", len(jobs), len(perKey), keys*subs, keys*subs)
		}
		for k, n := range perKey {
			if n != 1 {
				t.Errorf("delivery key %s: %d jobs", k, n)
			}
		}
	})
}

// TestDoRace (both stores): 16 callers run Do on the same 4 keys, each in
// its own order, waiting for a holder. Overlap: the callers start together
// on a channel. Each key's fn runs exactly once, and every call of the key
// returns that run's result (cached for all but the one that ran it).
func TestDoRace(t *testing.T) {
	t.Parallel()
	bothStores(t, func() *idem.Config { return &idem.Config{} }, func(t *testing.T, c *idem.Client) {
		const callers, keys = 16, 4
		var runs [keys]atomic.Int32
		var (
			mu      sync.Mutex
			results = map[int]map[string]int{} // key → result → calls
			fresh   [keys]int
		)
		startTogether(callers, func(g int) {
			for i := range keys {
				k := (g + i) % keys
				r, err := c.Do(t.Context(), fmt.Sprint("do-", k), func(context.Context) (any, error) {
					return map[string]int32{"key": int32(k), "run": runs[k].Add(1)}, nil
				}, &idem.DoOpts{Wait: 30 * time.Second})
				if err != nil {
					t.Errorf("caller %d, key %d: %v", g, k, err)
					return
				}
				mu.Lock()
				if results[k] == nil {
					results[k] = map[string]int{}
				}
				results[k][string(r.Result)]++
				if !r.WasCached {
					fresh[k]++
				}
				mu.Unlock()
			}
		})
		for k := range keys {
			if n := runs[k].Load(); n != 1 {
				t.Errorf("key %d: fn ran %d times, want 1", k, n)
			}
			want := fmt.Sprintf(`{"key":%d,"run":1}`, k)
			if fresh[k] != 1 || len(results[k]) != 1 || results[k][want] != callers {
				t.Errorf("key %d: %d uncached calls, results %v: want 1 and %d × %s", k, fresh[k], results[k], callers, want)
			}
		}
	})
}
