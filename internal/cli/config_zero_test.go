package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// healthThresholds serves the API of cfg (its idem.Config and
// idemhttp.Config, as `idem serve` builds them) over a real SQLite store
// and returns the threshold of every check of GET /v1/health.
func healthThresholds(t *testing.T, cfg *ServeConfig) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, cfg.clientConfig(&idem.Config{DisableMaintenance: true}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(client, st, cfg.serverConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	secret, k := idemhttp.NewAPIKey("default", true, "t", time.Now())
	if err := st.APIKeyCreate(ctx, k); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h idemhttp.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/health: %d %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for name, c := range h.Checks {
		out[name] = c.Threshold
	}
	return out
}

// TestConfigExplicitZeroHealth: a health threshold of 0 written in the
// file or the environment is a threshold of 0 (any dead job is
// unhealthy, a success rate is never too low…), not the default, and
// --print-config shows it.
func TestConfigExplicitZeroHealth(t *testing.T) {
	t.Parallel()
	file := `
[health]
dead_jobs = 0
available_jobs = 0
oldest_available = 0
success_rate = 0
failed_per_kind_24h = 0
running_for = "0s"
retry_rate = 0
cache_bytes = 0
expired_entries = 0
hit_rate = 0.0
hit_rate_min_lookups = 0
`
	checks := []string{"dead_jobs", "available_jobs", "oldest_available_s", "success_rate_1m", "failed_per_kind_24h",
		"longest_running_s", "retry_rate_24h", "cache_bytes", "cache_expired_entries", "cache_hit_rate"}
	for _, tc := range []struct {
		name, file string
		env        []string
		zero       []string
	}{
		{"file", file, nil, checks},
		{"environment", "", []string{"IDEM_HEALTH_DEAD_JOBS=0", "IDEM_HEALTH_SUCCESS_RATE=0", "IDEM_HEALTH_RUNNING_FOR=0s"},
			[]string{"dead_jobs", "success_rate_1m", "longest_running_s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadFile(t, tc.file, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			got := healthThresholds(t, cfg)
			for _, name := range tc.zero {
				th, ok := got[name]
				if !ok || th != 0 {
					t.Errorf("check %s: threshold %v (present %v), want 0", name, th, ok)
				}
			}
			printed, err := configMap(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if v := printed["health"].(map[string]any)["dead_jobs"]; v != int64(0) {
				t.Errorf("--print-config health.dead_jobs = %v (%T), want 0", v, v)
			}
		})
	}
}

// TestConfigExplicitZero: every other key where 0 means something takes
// it: no jitter, no auth cache, a dedup window only while the job is
// unfinished, finished jobs kept (like retention.dead), every result
// compressed; in the file, the environment, and in per-queue and per-kind
// retry policies.
func TestConfigExplicitZero(t *testing.T) {
	t.Parallel()
	noJitter := func(t *testing.T, name string, p idem.RetryPolicy) {
		t.Helper()
		if lo, hi := p.Delay(2, 0), p.Delay(2, 0.999); lo != hi {
			t.Errorf("%s: delays %v and %v: jitter applied, want none", name, lo, hi)
		}
	}
	for _, tc := range []struct {
		name, file string
		env        []string
		check      func(t *testing.T, c *idem.Config, s *idemhttp.Config)
	}{
		{"retry jitter", "[retry]\njitter = 0\n", nil, func(t *testing.T, c *idem.Config, _ *idemhttp.Config) {
			noJitter(t, "retry", c.Retry)
		}},
		{"retry jitter from the environment", "", []string{"IDEM_RETRY_JITTER=0"}, func(t *testing.T, c *idem.Config, _ *idemhttp.Config) {
			noJitter(t, "retry", c.Retry)
		}},
		{"per-queue and per-kind jitter", "[retry_by_queue.q]\njitter = 0\n[retry_by_kind.k]\nbase = \"2s\"\njitter = 0.0\n", nil,
			func(t *testing.T, c *idem.Config, _ *idemhttp.Config) {
				noJitter(t, "retry_by_queue.q", c.RetryByQueue["q"])
				noJitter(t, "retry_by_kind.k", c.RetryByKind["k"])
				if d := c.RetryByKind["k"].Delay(1, 0.5); d != 2*time.Second {
					t.Errorf("retry_by_kind.k first delay %v, want 2s", d)
				}
			}},
		{"a per-queue policy without jitter keeps the default jitter", "[retry_by_queue.q]\nbase = \"10s\"\n", nil,
			func(t *testing.T, c *idem.Config, _ *idemhttp.Config) {
				if lo, hi := c.RetryByQueue["q"].Delay(1, 0), c.RetryByQueue["q"].Delay(1, 0.999); lo == hi {
					t.Errorf("retry_by_queue.q: no jitter (%v), want the default", lo)
				}
			}},
		{"auth cache ttl", "[http]\nauth_cache_ttl = 0\n", nil, func(t *testing.T, _ *idem.Config, s *idemhttp.Config) {
			if s.AuthCacheTTL >= 0 { // idemhttp: negative disables the cache
				t.Errorf("AuthCacheTTL %v: want the cache disabled (negative)", s.AuthCacheTTL)
			}
		}},
		{"dedup window", "[jobs]\ndedup_window = 0\n", nil, func(t *testing.T, c *idem.Config, _ *idemhttp.Config) {
			if c.DedupWindow >= 0 { // idem: negative = a window of 0
				t.Errorf("DedupWindow %v: want a window of 0 (negative)", c.DedupWindow)
			}
		}},
		{"retention", "[retention]\ncompleted = 0\ncancelled = \"0s\"\n", nil, func(t *testing.T, c *idem.Config, _ *idemhttp.Config) {
			if c.CompletedRetention >= 0 || c.CancelledRetention >= 0 { // idem: negative keeps them
				t.Errorf("retention %v %v: want kept (negative)", c.CompletedRetention, c.CancelledRetention)
			}
		}},
		{"compress threshold", "[jobs]\ncompress_threshold = 0\n", nil, func(t *testing.T, c *idem.Config, _ *idemhttp.Config) {
			// 1 is 0 for gzip: a 1-byte result never compresses smaller.
			if c.CompressThreshold != 1 {
				t.Errorf("CompressThreshold %d, want 1 (compress every result)", c.CompressThreshold)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadFile(t, tc.file, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg.clientConfig(&idem.Config{}), cfg.serverConfig(nil))
		})
	}
}

// TestConfigExplicitZeroPrinted: --print-config shows an explicit zero
// of a retry policy (top level and per queue) as 0.
func TestConfigExplicitZeroPrinted(t *testing.T) {
	t.Parallel()
	out, errs, code := run(t, "serve", "--print-config", "--config",
		writeConfig(t, "[retry]\njitter = 0\n[retry_by_queue.q]\njitter = 0\n[health]\ndead_jobs = 0\n"))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"[retry]\n", "jitter = 0.0\n", "[retry_by_queue.q]\njitter = 0.0\n", "dead_jobs = 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, out)
		}
	}
}

// TestConfigRejectsZeroWhereInvalid: where 0 (or a negative value) has
// no meaning, start-up fails with an error naming the key, instead of
// running with the default.
func TestConfigRejectsZeroWhereInvalid(t *testing.T) {
	t.Parallel()
	checkConfigRefusals(t, []configRefusal{
		{"[retry]\nbase = 0\n", "", "retry.base"},
		{"[retry]\nfactor = 0\n", "", "retry.factor"},
		{"[retry]\nfactor = 0.5\n", "", "retry.factor"},
		{"[retry]\nmax = \"0s\"\n", "", "retry.max"},
		{"", "IDEM_RETRY_MAX=0", "retry.max"},
		{"[retry_by_queue.webhooks]\nbase = 0\n", "", "retry_by_queue.webhooks.base"},
		{"[retry_by_kind.flaky]\nfactor = 0\n", "", "retry_by_kind.flaky.factor"},
		{"[jobs]\nresult_ttl = 0\n", "", "jobs.result_ttl"},
		{"[jobs.result_ttl_by_kind]\nreport = 0\n", "", "jobs.result_ttl_by_kind.report"},
		{"[http]\nmax_body_bytes = 0\n", "", "http.max_body_bytes"},
		{"[http]\nmetrics_max_labels = 0\n", "", "http.metrics_max_labels"},
		{"", "IDEM_HTTP_METRICS_MAX_LABELS=-1", "http.metrics_max_labels"},
		{"[health]\ndead_jobs = -1\n", "", "health.dead_jobs"},
		{"[health]\nrunning_for = \"-1s\"\n", "", "health.running_for"},
		{"listen = \"\"\n", "", "listen"},
		{"database = \"\"\n", "", "database"},
	})
	// A flag is checked the same way.
	if _, err := loadConfig("", nil, serveFlagSet(t, "--listen", "")); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("--listen \"\": %v", err)
	}
}
