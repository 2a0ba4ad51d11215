package idemhttp_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

// TestCleanupMetrics is seed 000's cleanup monitoring in Prometheus: the
// expired entries awaiting cleanup (idem_idempotency_expired_records) and
// how often the cleanup runs and what it deletes
// (idem_maintenance_{runs,rows}_total, _last_run_timestamp_seconds).
func TestCleanupMetrics(t *testing.T) {
	t.Parallel()
	m := idemhttp.NewJobMetrics(0)
	clock := &shiftClock{}
	e := setup(t, openSQLite, &setupOpts{
		clientCfg: &idem.Config{Now: clock.now, Observer: m, MaintenanceInterval: 20 * time.Millisecond},
		serverCfg: &idemhttp.Config{Now: clock.now, MetricsCacheTTL: time.Nanosecond}})
	if err := e.server.Registry().Register(m); err != nil {
		t.Fatal(err)
	}
	metric := func(body, series string) (float64, bool) {
		t.Helper()
		sub := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if sub == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(sub[1], 64)
		if err != nil {
			t.Fatalf("%s: %v", series, err)
		}
		return v, true
	}
	scrape := func() string {
		t.Helper()
		r := e.req("GET", "/metrics", "", nil)
		expect(t, r, 200, "")
		return string(r.body)
	}
	e.enqueue(e.keyA, map[string]any{"kind": "buffer", "queue": "geo", "idempotency_key": "geo_1", "dedup_window": "0s",
		"result_ttl": "1h"})
	e.complete(e.keyA, e.claim(e.keyA, "geo"), map[string]any{"features_processed": 1200})
	if v, ok := metric(scrape(), "idem_idempotency_expired_records"); !ok || v != 0 {
		t.Fatalf("expired records before the TTL: %v (present %v)", v, ok)
	}
	clock.shift(2 * time.Hour) // the result expired; no cleanup ran yet
	body := scrape()
	if v, ok := metric(body, "idem_idempotency_expired_records"); !ok || v != 1 {
		t.Fatalf("expired records past the TTL: %v (present %v)", v, ok)
	}
	if _, ok := metric(body, `idem_maintenance_runs_total{outcome="ok",service="retention"}`); ok {
		t.Fatal("a retention run counted before the client started")
	}
	if err := e.client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.client.Stop(ctx)
	})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		body = scrape()
		runs, _ := metric(body, `idem_maintenance_runs_total{outcome="ok",service="retention"}`)
		rows, _ := metric(body, `idem_maintenance_rows_total{service="retention"}`)
		last, _ := metric(body, `idem_maintenance_last_run_timestamp_seconds{service="retention"}`)
		expired, _ := metric(body, "idem_idempotency_expired_records")
		if runs >= 1 && rows >= 1 && expired == 0 {
			if at := time.Unix(0, int64(last*1e9)); at.Before(clock.now().Add(-time.Minute)) || at.After(clock.now().Add(time.Second)) {
				t.Fatalf("last retention run at %s, want about %s (the client's clock)", at, clock.now())
			}
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no cleanup seen in /metrics: runs %v rows %v expired %v\n%s", runs, rows, expired,
				grepLines(body, "idem_maintenance"))
		}
	}
}
