package idemhttp_test

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
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
