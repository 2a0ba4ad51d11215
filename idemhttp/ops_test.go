package idemhttp_test

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestMetricsCheapAndBounded: a flood of scrapes reads the store once per
// MetricsCacheTTL, and thousands of queues give at most MetricsMaxQueues
// queue labels plus "other".
func TestMetricsCheapAndBounded(t *testing.T) {
	t.Parallel()
	clock := &testClock{now: time.Now()}
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{Now: clock.Now, MetricsMaxQueues: 10}})
	items := make([]idem.EnqueueParams, 0, 300)
	for i := range 300 {
		items = append(items, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: fmt.Sprintf("q%03d", i)}})
	}
	// q000 holds the most jobs, so it keeps its own series.
	items = append(items, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: "q000"}})
	if _, err := e.client.EnqueueMany(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	var body string
	for range 50 {
		r := e.req("GET", "/metrics", "", nil)
		expect(t, r, 200, "")
		body = string(r.body)
	}
	if n := idemhttp.MetricsStoreReads(e.server); n != 1 {
		t.Fatalf("50 scrapes read the store %d times, want 1", n)
	}
	labels := map[string]bool{}
	for _, m := range regexp.MustCompile(`idem_jobs\{queue="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		labels[m[1]] = true
	}
	if len(labels) != 11 || !labels["other"] || !labels["q000"] {
		t.Fatalf("%d queue labels, want 10 + other (q000 among them): %v", len(labels), labels)
	}
	if !regexp.MustCompile(`idem_jobs\{queue="other",state="available"\} 290\n`).MatchString(body) {
		t.Fatalf("other does not sum the rest:\n%s", body)
	}
	clock.add(idemhttp.DefaultMetricsCacheTTL)
	expect(t, e.req("GET", "/metrics", "", nil), 200, "")
	if n := idemhttp.MetricsStoreReads(e.server); n != 2 {
		t.Fatalf("a scrape after the TTL read the store %d times in all, want 2", n)
	}
}

// countingStore is the real store, counting the reads /v1/stats makes.
type countingStore struct {
	store.Store
	lists, durations, stats, kinds atomic.Int64
}

func (c *countingStore) JobKindStats(ctx context.Context, p *store.JobKindStatsParams) ([]*store.JobKindStat, error) {
	c.kinds.Add(1)
	return c.Store.JobKindStats(ctx, p)
}

func (c *countingStore) JobList(ctx context.Context, p *store.JobListParams) ([]*idemtype.JobRow, int64, error) {
	c.lists.Add(1)
	return c.Store.JobList(ctx, p)
}

func (c *countingStore) JobDurations(ctx context.Context, p *store.JobDurationsParams) ([]*store.JobDuration, error) {
	c.durations.Add(1)
	return c.Store.JobDurations(ctx, p)
}

func (c *countingStore) QueueStats(ctx context.Context, p *store.QueueStatsParams) ([]*store.QueueStat, error) {
	c.stats.Add(1)
	return c.Store.QueueStats(ctx, p)
}

// TestStatsOneQueryPerStore: /v1/stats over hundreds of queues reads the
// store a fixed number of times (counts, then latencies of every queue),
// not once per queue, on both stores.
func TestStatsOneQueryPerStore(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "postgres" {
				dbtest.PostgresURL(t)
			}
			var cs *countingStore
			e := setup(t, func(t *testing.T) store.Store { cs = &countingStore{Store: open(t)}; return cs }, nil)
			items := make([]idem.EnqueueParams, 0, 300)
			for i := range 300 {
				items = append(items, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Tenant: "a", Queue: fmt.Sprintf("q%03d", i)}})
			}
			if _, err := e.client.EnqueueMany(context.Background(), items); err != nil {
				t.Fatal(err)
			}
			j := e.claim(e.keyA, "q007")
			expect(t, e.req("POST", "/v1/jobs/"+j["id"].(string)+"/complete", e.keyA,
				map[string]any{"lease_token": j["lease_token"]}), 200, "")
			lists, durations, stats, kinds := cs.lists.Load(), cs.durations.Load(), cs.stats.Load(), cs.kinds.Load()
			r := e.req("GET", "/v1/stats", e.keyA, nil)
			expect(t, r, 200, "")
			// No list: the per-kind summary is one aggregate, whatever the
			// queues and the jobs.
			if n, m := cs.lists.Load()-lists, cs.kinds.Load()-kinds; n != 0 || m != 1 {
				t.Errorf("stats listed jobs %d times and summarised kinds %d times, want 0 and 1", n, m)
			}
			if n, m := cs.durations.Load()-durations, cs.stats.Load()-stats; n != 1 || m != 1 {
				t.Errorf("stats read durations %d and counts %d times, want 1 and 1", n, m)
			}
			queues := r.json(t)["queues"].(map[string]any)
			if len(queues) != 300 {
				t.Fatalf("%d queues, want 300", len(queues))
			}
			q := queues["q007"].(map[string]any)
			if q["counts"].(map[string]any)["completed"] != float64(1) || q["run_ms"] == nil {
				t.Fatalf("q007: %v", q)
			}
		})
	}
}
