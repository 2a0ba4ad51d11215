package cli

import (
	"fmt"
	"sort"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

// An explicit 0 in the configuration of `idem serve` never silently
// becomes a default. ServeConfig is decoded over the defaults, so each of
// its settings holds the value to use, and a 0 there was written (in the
// file, an IDEM_* variable or a flag). Where idem or idemhttp read 0 as
// "the default", the 0 is passed on in the form they read as 0 (or it is
// refused at start-up when 0 means nothing):
//
//   - retry.jitter 0: no jitter (idem: negative);
//   - jobs.dedup_window 0: a key blocks only while its job is unfinished
//     (idem: negative);
//   - jobs.compress_threshold 0: every result is compressed (idem: 1);
//   - retention.completed, .cancelled and .events 0: kept, like retention.dead 0
//     (idem: negative);
//   - http.auth_cache_ttl 0: no cache (idemhttp: negative);
//   - delivery.slot_wait 0: a push does not wait for a slot (webhook:
//     negative);
//   - health.* 0: a threshold of 0 (idemhttp.HealthZero);
//   - refused: retry.base, retry.factor (below 1), retry.max,
//     jobs.result_ttl (and per kind), http.max_body_bytes,
//     http.metrics_max_labels, delivery.timeout, delivery.max_per_target,
//     delivery.max_body_bytes, delivery.target_refresh, an empty
//     delivery.user_agent, an empty database or listen, a negative
//     health threshold, retention, dedup window or auth cache TTL.

// zeroAsNegative is d, or -1 for 0: the "none" of idem's and idemhttp's
// durations where 0 takes the default.
func zeroAsNegative(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// healthZero is v, or idemhttp.HealthZero for 0.
func healthZero[T int64 | time.Duration | float64](v T) T {
	if v == 0 {
		return idemhttp.HealthZero
	}
	return v
}

// validateZero refuses the settings where 0 (or a negative value) means
// nothing, naming the key.
func (c *ServeConfig) validateZero() []error {
	var errs []error
	for key, v := range map[string]string{"database": c.Database, "listen": c.Listen} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is empty: want a value", key))
		}
	}
	if c.Jobs.ResultTTL <= 0 {
		errs = append(errs, fmt.Errorf("jobs.result_ttl %s: want a positive duration", time.Duration(c.Jobs.ResultTTL)))
	}
	for _, kind := range sortedKeys(c.Jobs.ResultTTLByKind) {
		if err := idem.ValidateName("kind", kind); err != nil {
			errs = append(errs, fmt.Errorf("jobs.result_ttl_by_kind.%s: no job has this kind: %w", kind, err))
		}
		if d := c.Jobs.ResultTTLByKind[kind]; d <= 0 {
			errs = append(errs, fmt.Errorf("jobs.result_ttl_by_kind.%s %s: want a positive duration", kind, time.Duration(d)))
		}
	}
	// 0 has a meaning for these (keep, only while unfinished, no cache); a
	// negative value has none.
	for _, d := range []struct {
		key string
		v   Duration
	}{{"jobs.dedup_window", Duration(c.Jobs.DedupWindow)}, {"retention.completed", c.Retention.Completed},
		{"retention.cancelled", c.Retention.Cancelled}, {"retention.dead", c.Retention.Dead},
		{"retention.events", c.Retention.Events}, {"http.auth_cache_ttl", c.HTTP.AuthCacheTTL}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative: want 0 or more", d.key, time.Duration(d.v)))
		}
	}
	errs = append(errs, c.Retry.validate("retry")...)
	for _, q := range sortedKeys(c.RetryByQueue) {
		if err := idem.ValidateName("queue", q); err != nil {
			errs = append(errs, fmt.Errorf("retry_by_queue.%s: no job has this queue: %w", q, err))
		}
		errs = append(errs, c.RetryByQueue[q].validate("retry_by_queue."+q)...)
	}
	for _, k := range sortedKeys(c.RetryByKind) {
		if err := idem.ValidateName("kind", k); err != nil {
			errs = append(errs, fmt.Errorf("retry_by_kind.%s: no job has this kind: %w", k, err))
		}
		errs = append(errs, c.RetryByKind[k].validate("retry_by_kind."+k)...)
	}
	if c.HTTP.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("http.max_body_bytes %d: want 1 or more", c.HTTP.MaxBodyBytes))
	}
	if c.HTTP.MetricsMaxLabels <= 0 {
		errs = append(errs, fmt.Errorf("http.metrics_max_labels %d: want 1 or more", c.HTTP.MetricsMaxLabels))
	}
	h := c.Health
	for _, f := range []struct {
		key string
		v   float64
	}{{"dead_jobs", float64(h.DeadJobs)}, {"available_jobs", float64(h.AvailableJobs)},
		{"oldest_available", float64(h.OldestAvailable)}, {"success_rate", h.SuccessRate},
		{"failed_per_kind_24h", float64(h.FailedPerKind24h)}, {"running_for", float64(h.RunningFor)},
		{"retry_rate", h.RetryRate}, {"cache_bytes", float64(h.CacheBytes)}, {"expired_entries", float64(h.ExpiredEntries)},
		{"hit_rate", h.HitRate}, {"hit_rate_min_lookups", float64(h.HitRateMinLookups)}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("health.%s is negative: want 0 or more", f.key))
		}
	}
	for _, r := range []struct {
		key string
		v   float64
	}{{"success_rate", h.SuccessRate}, {"retry_rate", h.RetryRate}, {"hit_rate", h.HitRate}} {
		if r.v > 1 {
			errs = append(errs, fmt.Errorf("health.%s %v: want a share between 0 and 1", r.key, r.v))
		}
	}
	return errs
}

// sortedKeys are the keys of m in order (stable error messages).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
