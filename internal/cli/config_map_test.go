package cli

import (
	"reflect"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestConfigReachesTheRuntime: every setting of a config file arrives in
// the idem.Config and idemhttp.Config `idem serve` builds (a key decoded
// but never passed on would be silently ignored).
func TestConfigReachesTheRuntime(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
[jobs]
max_attempts = 9
lease = "45s"
dedup_window = "1h"
result_ttl = "2h"
compress_threshold = 2048
poll_interval = "250ms"
[jobs.result_ttl_by_kind]
"send-email" = "24h"
[retry]
base = "2s"
factor = 3.0
max = "10m"
jitter = 0.2
[retry_by_queue.webhooks]
base = "30s"
[retry_by_kind.flaky]
delays = [1, 5, "30s"]
[retention]
completed = "48h"
cancelled = "24h"
dead = "0s"
[maintenance]
disabled = true
interval = "3s"
rescue_interval = "7s"
leader_ttl = "20s"
schedule_interval = "4s"
schedule_grace = "3m"
[http]
max_body_bytes = 65536
auth_cache_ttl = "15s"
cors_origins = ["https://app.example"]
[health]
dead_jobs = 5
available_jobs = 6
oldest_available = "90s"
success_rate = 0.8
failed_per_kind_24h = 11
running_for = "2h"
retry_rate = 0.3
cache_bytes = 1000
expired_entries = 12
hit_rate = 0.4
hit_rate_min_lookups = 13
`)
	cfg, err := loadConfig(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.clientConfig(&idem.Config{})
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"max attempts", c.MaxAttempts, 9},
		{"lease", c.LeaseDuration, 45 * time.Second},
		{"dedup window", c.DedupWindow, time.Hour},
		{"result ttl", c.ResultTTL, 2 * time.Hour},
		{"compress threshold", c.CompressThreshold, 2048},
		{"result ttl by kind", c.ResultTTLByKind, map[string]time.Duration{"send-email": 24 * time.Hour}},
		{"retry", c.Retry, idem.RetryPolicy{Base: 2 * time.Second, Factor: 3, Max: 10 * time.Minute, Jitter: 0.2}},
		{"retry by queue", c.RetryByQueue, map[string]idem.RetryPolicy{"webhooks": {Base: 30 * time.Second}}},
		{"retry by kind", c.RetryByKind, map[string]idem.RetryPolicy{"flaky": {Delays: []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}}}},
		{"completed retention", c.CompletedRetention, 48 * time.Hour},
		{"cancelled retention", c.CancelledRetention, 24 * time.Hour},
		{"dead retention", c.DeadRetention, time.Duration(0)},
		{"maintenance disabled", c.DisableMaintenance, true},
		{"maintenance interval", c.MaintenanceInterval, 3 * time.Second},
		{"rescue interval", c.RescueInterval, 7 * time.Second},
		{"leader ttl", c.LeaderTTL, 20 * time.Second},
		{"schedule interval", c.ScheduleInterval, 4 * time.Second},
		{"schedule grace", c.ScheduleGrace, 3 * time.Minute},
		{"poll interval", c.PollInterval, 250 * time.Millisecond},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	s := cfg.serverConfig(nil)
	h := s.Health
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"max body", s.MaxBodyBytes, int64(65536)},
		{"auth cache", s.AuthCacheTTL, 15 * time.Second},
		{"cors", s.CORS.AllowedOrigins, []string{"https://app.example"}},
		{"dead jobs", h.DeadJobs, int64(5)},
		{"available jobs", h.AvailableJobs, int64(6)},
		{"oldest available", h.OldestAvailable, 90 * time.Second},
		{"success rate", h.SuccessRate, 0.8},
		{"failed per kind", h.FailedPerKind24h, int64(11)},
		{"running for", h.RunningFor, 2 * time.Hour},
		{"retry rate", h.RetryRate, 0.3},
		{"cache bytes", h.CacheBytes, int64(1000)},
		{"expired entries", h.ExpiredEntries, int64(12)},
		{"hit rate", h.HitRate, 0.4},
		{"hit rate min lookups", h.HitRateMinLookups, int64(13)},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Without per-queue or per-kind policies the maps stay nil (the
	// runtime's "none"), not empty.
	def, err := loadConfig("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dc := def.clientConfig(&idem.Config{}); dc.RetryByQueue != nil || dc.RetryByKind != nil || dc.ResultTTLByKind != nil {
		t.Errorf("defaults: %v %v %v", dc.RetryByQueue, dc.RetryByKind, dc.ResultTTLByKind)
	}
}

func TestMaskDatabase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://idem:s3cret@db:5432/idem?sslmode=require": "postgres://idem:xxxxx@db:5432/idem?sslmode=require",
		"postgres://idem@db/idem":                             "postgres://idem@db/idem",
		"./idem.db":                                           "./idem.db",
		"sqlite:/var/lib/idem/idem.db":                        "sqlite:/var/lib/idem/idem.db",
		"postgres://idem@db/idem?sslmode=require&password=s3cret&connect_timeout=5": "postgres://idem@db/idem?sslmode=require&password=xxxxx&connect_timeout=5",
		"postgres://idem@db/idem?Pass%77ord=s3cret;sslmode=disable":                 "postgres://idem@db/idem?password=xxxxx;sslmode=disable",
		"postgres://idem@db/idem?sslcert=c.pem&sslkey=k.pem&sslpassword=s3cret":     "postgres://idem@db/idem?sslcert=c.pem&sslkey=k.pem&sslpassword=xxxxx",
		"postgres://idem@db/idem?SSLPassword=s3cret":                                "postgres://idem@db/idem?sslpassword=xxxxx",
		"postgres://idem:s3cret%@db:5432/idem":                                      unparsableDatabase,
		"postgres://idem@db/idem?%zz=s3cret":                                        unparsableDatabase,
	} {
		if got := maskDatabase(in); got != want {
			t.Errorf("maskDatabase(%q) = %q, want %q", in, got, want)
		}
	}
}
