package cli

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/spf13/pflag"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/redact"
)

// envConfig names the configuration file of `idem serve`.
const envConfig = "IDEM_CONFIG"

// Duration is a time.Duration read as Go syntax ("90s", "1h30m") or as
// an integer number of seconds (90, "90"), and printed in Go syntax.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// maxSeconds is the largest number of seconds a time.Duration holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// parseDuration reads Go syntax or integer seconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil {
			n = math.MaxInt64
		}
		return secondsDuration(n)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: want Go syntax (30s, 5m, 1h30m) or integer seconds", s)
	}
	return d, nil
}

// secondsDuration is n seconds, or an error when a duration cannot hold
// them (the product would wrap around to another duration).
func secondsDuration(n int64) (time.Duration, error) {
	if n > maxSeconds || n < -maxSeconds {
		return 0, fmt.Errorf("%d seconds is out of range: want at most %d (about 292 years)", n, maxSeconds)
	}
	return time.Duration(n) * time.Second, nil
}

// floatSecondsDuration is v seconds, or an error when v is not a number a
// duration can hold.
func floatSecondsDuration(v float64) (time.Duration, error) {
	ns := v * float64(time.Second)
	if math.IsNaN(ns) || ns >= math.MaxInt64 || ns <= math.MinInt64 {
		return 0, fmt.Errorf("%v seconds is out of range: want at most %d (about 292 years)", v, maxSeconds)
	}
	return time.Duration(ns), nil
}

// Window is a dedup window: a Duration, or "forever" (idem.DedupForever:
// seed 001 keeps its keys indefinitely), which it prints as such.
type Window Duration

// MarshalText implements encoding.TextMarshaler.
func (w Window) MarshalText() ([]byte, error) {
	if time.Duration(w) == idem.DedupForever {
		return []byte(idem.DedupForeverName), nil
	}
	return Duration(w).MarshalText()
}

// durationHook decodes strings and numbers into Duration and Window, and
// integers as numberHook does.
func durationHook(from reflect.Type, to reflect.Type, data any) (any, error) {
	if to == reflect.TypeOf(Window(0)) {
		if s, ok := data.(string); ok && strings.TrimSpace(s) == idem.DedupForeverName {
			return Window(idem.DedupForever), nil
		}
		d, err := durationHook(from, reflect.TypeOf(Duration(0)), data)
		if v, ok := d.(Duration); ok {
			return Window(v), err
		}
		return d, err
	}
	if to != reflect.TypeOf(Duration(0)) {
		return numberHook(to, data)
	}
	switch v := data.(type) {
	case string:
		d, err := parseDuration(v)
		return Duration(d), err
	case int64:
		d, err := secondsDuration(v)
		return Duration(d), err
	case int:
		d, err := secondsDuration(int64(v))
		return Duration(d), err
	case float64:
		d, err := floatSecondsDuration(v)
		return Duration(d), err
	case bool:
		return nil, fmt.Errorf("%v is not a duration: want Go syntax (30s, 5m, 1h30m) or integer seconds", v)
	}
	return data, nil
}

// numberHook keeps the decoder from bending a value into an integer or
// text setting: a number or a boolean is not text, a string is read in base 10 (the decoder would read "010" as
// octal 8 and "0x10" as 16), and a fraction or a boolean is refused (the
// decoder would truncate 2.7 to 2 and read true as 1).
func numberHook(to reflect.Type, data any) (any, error) {
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
	case reflect.String:
		// Text is written as text: the decoder would turn listen = 8080
		// into "8080" and database = true into a file named "1".
		switch data.(type) {
		case int64, int, float64, bool:
			return nil, fmt.Errorf("%v is not a string: want it quoted", data)
		}
		return data, nil
	default:
		return data, nil
	}
	switch v := data.(type) {
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, to.Bits())
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", v)
		}
		return n, nil
	case float64:
		if v != math.Trunc(v) || v >= math.MaxInt64 || v < math.MinInt64 {
			return nil, fmt.Errorf("%v is not a whole number", v)
		}
		return int64(v), nil
	case bool:
		return nil, fmt.Errorf("%v is not a whole number", v)
	}
	return data, nil
}

// RetryConfig is a backoff policy in the configuration. Its fields are
// pointers so that a key written as 0 is told from a key not written: in
// [retry] every key has its default, in a retry_by_queue or retry_by_kind
// policy a key not written takes idem's default (idem.RetryPolicy).
type RetryConfig struct {
	Base   *Duration  `koanf:"base" toml:"base,omitempty"`
	Factor *float64   `koanf:"factor" toml:"factor,omitempty"`
	Max    *Duration  `koanf:"max" toml:"max,omitempty"`
	Jitter *float64   `koanf:"jitter" toml:"jitter,omitempty"`
	Delays []Duration `koanf:"delays" toml:"delays,omitempty"`
}

// validate checks the keys written in the policy named name ("retry",
// "retry_by_queue.webhooks"): 0 has no meaning for base, factor and max.
func (r RetryConfig) validate(name string) []error {
	var errs []error
	if r.Base != nil && *r.Base <= 0 {
		errs = append(errs, fmt.Errorf("%s.base %s: want a positive duration (delays = [0] retries at once)", name, time.Duration(*r.Base)))
	}
	if r.Factor != nil && (!(*r.Factor >= 1) || math.IsInf(*r.Factor, 0)) {
		errs = append(errs, fmt.Errorf("%s.factor %v: want a finite number, 1 or more (1 = a constant delay)", name, *r.Factor))
	}
	if r.Max != nil && *r.Max <= 0 {
		errs = append(errs, fmt.Errorf("%s.max %s: want a positive duration", name, time.Duration(*r.Max)))
	}
	if r.Jitter != nil && !(*r.Jitter >= 0 && *r.Jitter <= 1) {
		errs = append(errs, fmt.Errorf("%s.jitter %v: want 0 (none) to 1", name, *r.Jitter))
	}
	for _, d := range r.Delays {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s.delays: %s: want no negative delay", name, time.Duration(d)))
		}
	}
	if len(r.Delays) == 0 {
		// The cap would hide the base: every delay would be max.
		base, mx := idem.DefaultRetryBase, idem.DefaultRetryMax // a key not written: idem's default
		if r.Base != nil {
			base = time.Duration(*r.Base)
		}
		if r.Max != nil {
			mx = time.Duration(*r.Max)
		}
		if base > 0 && mx > 0 && mx < base {
			errs = append(errs, fmt.Errorf("%s.max %s is below %s.base %s: want a max of at least the base", name, mx, name, base))
		}
	}
	return errs
}

// policy is the idem.RetryPolicy of r: a key not written stays zero
// (idem's default), a jitter of 0 becomes idem's "none" (negative).
func (r RetryConfig) policy() idem.RetryPolicy {
	var p idem.RetryPolicy
	if r.Base != nil {
		p.Base = time.Duration(*r.Base)
	}
	if r.Factor != nil {
		p.Factor = *r.Factor
	}
	if r.Max != nil {
		p.Max = time.Duration(*r.Max)
	}
	if r.Jitter != nil {
		p.Jitter = *r.Jitter
		if p.Jitter == 0 {
			p.Jitter = -1
		}
	}
	for _, d := range r.Delays {
		p.Delays = append(p.Delays, time.Duration(d))
	}
	return p
}

// ServeConfig is the whole configuration of `idem serve`: defaults, then
// the file (--config or IDEM_CONFIG), then IDEM_* variables, then flags.
// docs/idem.example.toml documents every key.
type ServeConfig struct {
	Database        string   `koanf:"database" toml:"database"`
	Listen          string   `koanf:"listen" toml:"listen"`
	OpsListen       string   `koanf:"ops_listen" toml:"ops_listen"`
	ShutdownTimeout Duration `koanf:"shutdown_timeout" toml:"shutdown_timeout"`
	NoMigrate       bool     `koanf:"no_migrate" toml:"no_migrate"`
	Log             struct {
		Level  string `koanf:"level" toml:"level"`
		Format string `koanf:"format" toml:"format"`
	} `koanf:"log" toml:"log"`
	Jobs struct {
		MaxAttempts       int                 `koanf:"max_attempts" toml:"max_attempts"`
		Lease             Duration            `koanf:"lease" toml:"lease"`
		DedupWindow       Window              `koanf:"dedup_window" toml:"dedup_window"` // a duration or "forever"
		ResultTTL         Duration            `koanf:"result_ttl" toml:"result_ttl"`
		ResultTTLByKind   map[string]Duration `koanf:"result_ttl_by_kind" toml:"result_ttl_by_kind,omitempty"`
		CompressThreshold int                 `koanf:"compress_threshold" toml:"compress_threshold"`
		// PollInterval: how often a waiting claim (POST /v1/claim) and an
		// idle delivered queue look again for jobs they were not told
		// about (enqueued by other nodes, come due).
		PollInterval Duration `koanf:"poll_interval" toml:"poll_interval"`
	} `koanf:"jobs" toml:"jobs"`
	Retry        RetryConfig            `koanf:"retry" toml:"retry"`
	RetryByQueue map[string]RetryConfig `koanf:"retry_by_queue" toml:"retry_by_queue,omitempty"`
	RetryByKind  map[string]RetryConfig `koanf:"retry_by_kind" toml:"retry_by_kind,omitempty"`
	Retention    struct {
		Completed Duration `koanf:"completed" toml:"completed"`
		Cancelled Duration `koanf:"cancelled" toml:"cancelled"`
		Dead      Duration `koanf:"dead" toml:"dead"`
		// Events: how long the topics' event log keeps an event (seed
		// 003's replay look-back); 0 keeps events forever.
		Events Duration `koanf:"events" toml:"events"`
	} `koanf:"retention" toml:"retention"`
	Maintenance struct {
		Disabled       bool     `koanf:"disabled" toml:"disabled"`
		Interval       Duration `koanf:"interval" toml:"interval"`
		RescueInterval Duration `koanf:"rescue_interval" toml:"rescue_interval"`
		LeaderTTL      Duration `koanf:"leader_ttl" toml:"leader_ttl"`
		// ScheduleInterval: how often the scheduler looks for due firings;
		// ScheduleGrace: how late a firing of a skip schedule may still
		// run. LeaderTTL must stay under ScheduleGrace (docs/schedules.md).
		ScheduleInterval Duration `koanf:"schedule_interval" toml:"schedule_interval"`
		ScheduleGrace    Duration `koanf:"schedule_grace" toml:"schedule_grace"`
	} `koanf:"maintenance" toml:"maintenance"`
	Limits LimitsConfig `koanf:"limits" toml:"limits"`
	// Delivery: the webhook sender's settings ([delivery], config_delivery.go).
	Delivery DeliverySettings `koanf:"delivery" toml:"delivery"`
	// AutoKeyByQueue and AutoKeyByKind derive the idempotency key of the
	// jobs of a queue or kind enqueued without one (seed 002; file only).
	AutoKeyByQueue map[string]AutoKeyConfig `koanf:"auto_key_by_queue" toml:"auto_key_by_queue,omitempty"`
	AutoKeyByKind  map[string]AutoKeyConfig `koanf:"auto_key_by_kind" toml:"auto_key_by_kind,omitempty"`
	// jsonOut: --json was given (stdout lines as JSON); not a setting.
	jsonOut bool
	// logFormatSet: log.format was chosen by the file, the environment or
	// a flag (not the default); not a setting.
	logFormatSet bool
	// delivery: the delivery flags of `idem serve` (queues pushed to
	// webhook targets, topic delivery); flags only, not settings.
	delivery deliveryFlags

	HTTP struct {
		MaxBodyBytes int64    `koanf:"max_body_bytes" toml:"max_body_bytes"`
		AuthCacheTTL Duration `koanf:"auth_cache_ttl" toml:"auth_cache_ttl"`
		CORSOrigins  []string `koanf:"cors_origins" toml:"cors_origins"`
		// CORSHeaders are the request headers a browser may send (the
		// preflight's Access-Control-Allow-Headers).
		CORSHeaders []string `koanf:"cors_headers" toml:"cors_headers"`
		// MetricsMaxLabels bounds the distinct queues and kinds of the job
		// metrics; more are labelled "other".
		MetricsMaxLabels int `koanf:"metrics_max_labels" toml:"metrics_max_labels"`
	} `koanf:"http" toml:"http"`
	Health struct {
		DeadJobs          int64    `koanf:"dead_jobs" toml:"dead_jobs"`
		AvailableJobs     int64    `koanf:"available_jobs" toml:"available_jobs"`
		OldestAvailable   Duration `koanf:"oldest_available" toml:"oldest_available"`
		SuccessRate       float64  `koanf:"success_rate" toml:"success_rate"`
		FailedPerKind24h  int64    `koanf:"failed_per_kind_24h" toml:"failed_per_kind_24h"`
		RunningFor        Duration `koanf:"running_for" toml:"running_for"`
		RetryRate         float64  `koanf:"retry_rate" toml:"retry_rate"`
		CacheBytes        int64    `koanf:"cache_bytes" toml:"cache_bytes"`
		ExpiredEntries    int64    `koanf:"expired_entries" toml:"expired_entries"`
		HitRate           float64  `koanf:"hit_rate" toml:"hit_rate"`
		HitRateMinLookups int64    `koanf:"hit_rate_min_lookups" toml:"hit_rate_min_lookups"`
	} `koanf:"health" toml:"health"`
}

// configDefaults are the defaults of ServeConfig, as flat keys. Every
// settable scalar key is listed: IDEM_<KEY> with dots as underscores
// overrides it (IDEM_LOG_LEVEL, IDEM_JOBS_LEASE, IDEM_HEALTH_DEAD_JOBS).
func configDefaults() map[string]any {
	defs := map[string]any{
		"database": defaultDB, "listen": defaultListen, "ops_listen": "", "shutdown_timeout": defaultShutdownTTL.String(),
		"no_migrate": false, "log.level": "info", "log.format": "text",
		"jobs.max_attempts": idem.DefaultMaxAttempts, "jobs.lease": idem.DefaultLeaseDuration.String(),
		"jobs.dedup_window": idem.DefaultDedupWindow.String(), "jobs.result_ttl": idem.DefaultResultTTL.String(),
		"jobs.compress_threshold": idem.DefaultCompressThreshold, "jobs.poll_interval": idem.DefaultPollInterval.String(),
		"retry.base": idem.DefaultRetryBase.String(), "retry.factor": idem.DefaultRetryFactor,
		"retry.max": idem.DefaultRetryMax.String(), "retry.jitter": idem.DefaultRetryJitter, "retry.delays": []string{},
		"retention.completed": idem.DefaultCompletedRetention.String(), "retention.cancelled": idem.DefaultCancelledRetention.String(),
		"retention.dead": "0s", "retention.events": idem.DefaultEventRetention.String(),
		"maintenance.disabled": false, "maintenance.interval": idem.DefaultMaintenanceEvery.String(),
		"maintenance.rescue_interval": idem.DefaultRescueInterval.String(), "maintenance.leader_ttl": idem.DefaultLeaderTTL.String(),
		"maintenance.schedule_interval": idem.DefaultScheduleInterval.String(), "maintenance.schedule_grace": idem.DefaultScheduleGrace.String(),
		"limits.tenant_rate": "", "limits.tenant_concurrency": 0,
		"http.max_body_bytes": idemhttp.DefaultMaxBodyBytes, "http.auth_cache_ttl": idemhttp.DefaultAuthCacheTTL.String(),
		"http.cors_origins": []string{}, "http.cors_headers": idemhttp.DefaultCORSHeaders(), "http.metrics_max_labels": idemhttp.DefaultMetricsMaxLabels,
		"health.dead_jobs": idemhttp.DefaultHealthDeadJobs, "health.available_jobs": idemhttp.DefaultHealthAvailableJobs,
		"health.oldest_available": idemhttp.DefaultHealthOldestAvailable.String(), "health.success_rate": idemhttp.DefaultHealthSuccessRate,
		"health.failed_per_kind_24h": idemhttp.DefaultHealthFailedPerKind24h, "health.running_for": idemhttp.DefaultHealthRunningFor.String(),
		"health.retry_rate": idemhttp.DefaultHealthRetryRate, "health.cache_bytes": idemhttp.DefaultHealthCacheBytes,
		"health.expired_entries": idemhttp.DefaultHealthExpiredEntries, "health.hit_rate": idemhttp.DefaultHealthHitRate,
		"health.hit_rate_min_lookups": idemhttp.DefaultHealthHitRateMinLookups,
	}
	for k, v := range deliveryDefaults() {
		defs[k] = v
	}
	return defs
}

// envKey is the environment variable of a flat key.
func envKey(key string) string {
	if key == "database" {
		return envDatabaseURL
	}
	return "IDEM_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// flagKeys maps the flags of `idem serve` to their keys.
var flagKeys = map[string]string{
	"database": "database", "listen": "listen", "ops-listen": "ops_listen", "log-level": "log.level",
	"log-format": "log.format", "shutdown-timeout": "shutdown_timeout", "no-migrate": "no_migrate",
}

// loadConfig merges defaults < file < environment < changed flags and
// decodes the result; an unknown key or a bad value is an error naming it.
func loadConfig(path string, environ []string, flags *pflag.FlagSet) (*ServeConfig, error) {
	k := koanf.New(".")
	defs := configDefaults()
	if err := k.Load(confmap.Provider(defs, "."), nil); err != nil {
		return nil, fmt.Errorf("config defaults: %w", err)
	}
	formatSet := false
	if path != "" {
		kf := koanf.New(".")
		if err := kf.Load(file.Provider(path), toml.Parser()); err != nil {
			return nil, configErr(fmt.Errorf("config file %s: %w", path, err))
		}
		formatSet = kf.Exists("log.format")
		if err := k.Merge(kf); err != nil {
			return nil, configErr(fmt.Errorf("config file %s: %w", path, err))
		}
	}
	env := map[string]any{}
	sources := map[string]string{} // key → the variable or flag that set it
	byEnv := map[string]string{}
	for key := range defs {
		byEnv[envKey(key)] = key
	}
	sections := map[string]bool{} // IDEM_JOBS_, IDEM_HEALTH_, …: only keys live there
	for key := range defs {
		if section, _, ok := strings.Cut(key, "."); ok {
			sections[envKey(section)+"_"] = true
		}
	}
	var unknown []string
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if _, ok := byEnv[name]; !ok && val != "" {
			for prefix := range sections {
				if strings.HasPrefix(name, prefix) {
					unknown = append(unknown, name)
					break
				}
			}
		}
		if key, ok := byEnv[name]; ok && val != "" {
			if _, isList := defs[key].([]string); isList {
				items := strings.Split(val, ",")
				for i := range items {
					items[i] = strings.TrimSpace(items[i]) // "a, b" as well as "a,b"
				}
				env[key] = items
			} else {
				env[key] = val
			}
			sources[key] = name
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, configErr(fmt.Errorf("config: environment %s: no such key "+
			"(IDEM_<KEY> of a key of the file; per-queue and per-kind tables come from the file only)",
			strings.Join(unknown, ", ")))
	}
	if _, ok := env["log.format"]; ok {
		formatSet = true
	}
	if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
		return nil, fmt.Errorf("config environment: %w", err)
	}
	if flags != nil {
		fl := map[string]any{}
		flags.Visit(func(f *pflag.Flag) {
			if key, ok := flagKeys[f.Name]; ok {
				fl[key] = f.Value.String()
				sources[key] = "--" + f.Name
			}
		})
		if _, ok := fl["log.format"]; ok {
			formatSet = true
		}
		if err := k.Load(confmap.Provider(fl, "."), nil); err != nil {
			return nil, fmt.Errorf("config flags: %w", err)
		}
	}
	cfg := ServeConfig{logFormatSet: formatSet}
	err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook: durationHook, ErrorUnused: true, WeaklyTypedInput: true, TagName: "koanf"}})
	if err != nil {
		return nil, configErr(fmt.Errorf("config: %s", configMessage(err, path, sources)))
	}
	if err := cfg.validate(); err != nil {
		return nil, configErr(fmt.Errorf("config: %s", configMessage(err, path, sources)))
	}
	return &cfg, nil
}

// checkListen checks a listen address as net.Listen("tcp") reads it:
// host:port, the port a number up to 65535 or a service name. A bad one
// is a usage error at start-up, not a bind failure hinting at a busy port.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port, e.g. 127.0.0.1:8080 or :8080")
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}

// sameListen refuses an ops address that takes the port of the API's:
// the same port (not 0, any free one) on the same host or on every
// interface of either. The second bind would fail at start-up with a hint
// blaming another process.
func sameListen(api, ops string) error {
	if ops == "" {
		return nil
	}
	ah, ap, err1 := net.SplitHostPort(api)
	oh, op, err2 := net.SplitHostPort(ops)
	if err1 != nil || err2 != nil {
		return nil // checkListen reports it
	}
	an, err1 := net.LookupPort("tcp", ap)
	on, err2 := net.LookupPort("tcp", op)
	if err1 != nil || err2 != nil || an == 0 || an != on {
		return nil
	}
	// "" and "::" listen on every interface of both families, 0.0.0.0 on
	// every IPv4 one (whether an IPv6 address binds beside it depends on
	// the host: left to the bind).
	every := func(h string) bool { return h == "" || h == "::" }
	every4 := func(h, other string) bool {
		ip := net.ParseIP(other)
		return h == "0.0.0.0" && ip != nil && ip.To4() != nil
	}
	if ah == oh || every(ah) || every(oh) || every4(ah, oh) || every4(oh, ah) {
		return fmt.Errorf("takes the port of listen %q: want another port (ops_listen \"\" serves /healthz, /readyz and /metrics on listen)", api)
	}
	return nil
}

// validate checks what decoding cannot: enumerations, ranges, and that
// idem and idemhttp accept the result.
func (c *ServeConfig) validate() error {
	var errs []error
	if _, err := newLogger(os.Stderr, c.Log.Level, c.Log.Format); err != nil {
		errs = append(errs, err)
	}
	for key, addr := range map[string]string{"listen": c.Listen, "ops_listen": c.OpsListen} {
		if err := checkListen(addr); err != nil && (key == "listen" || addr != "") {
			errs = append(errs, fmt.Errorf("%s %q: %w", key, addr, err))
		}
	}
	if err := sameListen(c.Listen, c.OpsListen); err != nil {
		errs = append(errs, fmt.Errorf("ops_listen %q: %w", c.OpsListen, err))
	}
	if c.Jobs.Lease > 0 && time.Duration(c.Jobs.Lease) < time.Second {
		errs = append(errs, fmt.Errorf("jobs.lease %s: want at least 1s", time.Duration(c.Jobs.Lease)))
	}
	if c.Jobs.MaxAttempts < 1 || c.Jobs.MaxAttempts > idem.MaxMaxAttempts {
		errs = append(errs, fmt.Errorf("jobs.max_attempts %d: want 1 to %d", c.Jobs.MaxAttempts, idem.MaxMaxAttempts))
	}
	for key, d := range map[string]Duration{"jobs.lease": c.Jobs.Lease, "shutdown_timeout": c.ShutdownTimeout,
		"jobs.poll_interval": c.Jobs.PollInterval, "maintenance.interval": c.Maintenance.Interval,
		"maintenance.rescue_interval": c.Maintenance.RescueInterval, "maintenance.leader_ttl": c.Maintenance.LeaderTTL,
		"maintenance.schedule_interval": c.Maintenance.ScheduleInterval, "maintenance.schedule_grace": c.Maintenance.ScheduleGrace} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want a positive duration", key, time.Duration(d)))
		}
	}
	errs = append(errs, c.validateLeaderTTL()...)
	errs = append(errs, c.validateZero()...)
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.Delivery.validate()...)
	errs = append(errs, c.validateAutoKeys()...)
	server := c.serverConfig(nil)
	if herrs := c.validateCORSHeaders(); len(herrs) > 0 {
		errs = append(errs, herrs...)
		server.CORS.AllowedHeaders = nil // reported above, naming the key
	}
	for _, o := range c.HTTP.CORSOrigins {
		one := idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{o}}}
		if one.Validate() != nil {
			errs = append(errs, fmt.Errorf("http.cors_origins %q: want * or scheme://host[:port]", o))
		}
	}
	if len(errs) == 0 { // idemhttp's own checks, for what the keys above did not cover
		if err := server.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validateLeaderTTL refuses, in the file's terms, the leader term
// idem.NewClient refuses: one not under the schedule grace on a node that
// runs maintenance (a failover would miss the firings of skip schedules).
// Checked here, before the database is opened, not left to NewClient.
func (c *ServeConfig) validateLeaderTTL() []error {
	m := c.Maintenance
	if m.Disabled || m.LeaderTTL <= 0 || m.ScheduleGrace <= 0 || m.LeaderTTL < m.ScheduleGrace {
		return nil
	}
	return []error{fmt.Errorf("maintenance.leader_ttl %s is not under maintenance.schedule_grace %s: "+
		"a leader failover would miss the firings of skip schedules; raise the grace "+
		"(over leader_ttl plus a third of it plus schedule_interval) or lower leader_ttl",
		time.Duration(m.LeaderTTL), time.Duration(m.ScheduleGrace))}
}

// validateCORSHeaders checks http.cors_headers: at least one entry, each
// one header name (idemhttp decides which are) or "*".
func (c *ServeConfig) validateCORSHeaders() []error {
	if len(c.HTTP.CORSHeaders) == 0 {
		return []error{fmt.Errorf("http.cors_headers is empty: want the request headers browsers may send, e.g. %q",
			idemhttp.DefaultCORSHeaders())}
	}
	var errs []error
	for _, h := range c.HTTP.CORSHeaders {
		if idemhttp.ValidCORSHeader(h) != nil {
			errs = append(errs, fmt.Errorf("http.cors_headers %q: want a header name (one per list entry) or *", h))
		}
	}
	return errs
}

// clientConfig is the idem.Config of c. Every setting of c holds the
// value to use (the defaults are loaded first), so a 0 in c was written
// and is passed on in the form idem reads as 0, never as "the default"
// (see config_zero.go).
func (c *ServeConfig) clientConfig(cfg *idem.Config) *idem.Config {
	cfg.MaxAttempts = c.Jobs.MaxAttempts
	cfg.LeaseDuration = time.Duration(c.Jobs.Lease)
	cfg.PollInterval = time.Duration(c.Jobs.PollInterval)
	cfg.DedupWindow = zeroAsNegative(time.Duration(c.Jobs.DedupWindow))
	cfg.ResultTTL = time.Duration(c.Jobs.ResultTTL)
	cfg.CompressThreshold = c.Jobs.CompressThreshold
	if cfg.CompressThreshold == 0 {
		// Compress every result: idem reads 0 as its default, and 1 is the
		// same as 0 since a 1-byte result never gzips smaller.
		cfg.CompressThreshold = 1
	}
	if len(c.Jobs.ResultTTLByKind) > 0 {
		cfg.ResultTTLByKind = map[string]time.Duration{}
		for kind, d := range c.Jobs.ResultTTLByKind {
			cfg.ResultTTLByKind[kind] = time.Duration(d)
		}
	}
	cfg.Retry = c.Retry.policy()
	cfg.RetryByQueue = policies(c.RetryByQueue)
	cfg.RetryByKind = policies(c.RetryByKind)
	cfg.CompletedRetention = zeroAsNegative(time.Duration(c.Retention.Completed))
	cfg.CancelledRetention = zeroAsNegative(time.Duration(c.Retention.Cancelled))
	cfg.DeadRetention = time.Duration(c.Retention.Dead)
	cfg.EventRetention = zeroAsNegative(time.Duration(c.Retention.Events))
	cfg.DisableMaintenance = c.Maintenance.Disabled
	cfg.MaintenanceInterval = time.Duration(c.Maintenance.Interval)
	cfg.RescueInterval = time.Duration(c.Maintenance.RescueInterval)
	cfg.LeaderTTL = time.Duration(c.Maintenance.LeaderTTL)
	cfg.ScheduleInterval = time.Duration(c.Maintenance.ScheduleInterval)
	cfg.ScheduleGrace = time.Duration(c.Maintenance.ScheduleGrace)
	cfg.Limits = c.Limits.limits()
	cfg.Delivery = c.Delivery.config()
	cfg.AutoKeyByQueue = autoKeys(c.AutoKeyByQueue)
	cfg.AutoKeyByKind = autoKeys(c.AutoKeyByKind)
	return cfg
}

func policies(in map[string]RetryConfig) map[string]idem.RetryPolicy {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]idem.RetryPolicy, len(in))
	for name, r := range in {
		out[name] = r.policy()
	}
	return out
}

// serverConfig is the idemhttp.Config of c.
func (c *ServeConfig) serverConfig(cfg *idemhttp.Config) *idemhttp.Config {
	if cfg == nil {
		cfg = &idemhttp.Config{}
	}
	cfg.MaxBodyBytes = c.HTTP.MaxBodyBytes
	cfg.AuthCacheTTL = zeroAsNegative(time.Duration(c.HTTP.AuthCacheTTL)) // negative: no cache
	cfg.CORS.AllowedOrigins = c.HTTP.CORSOrigins
	cfg.CORS.AllowedHeaders = c.HTTP.CORSHeaders
	h := c.Health
	cfg.Health = idemhttp.HealthConfig{DeadJobs: healthZero(h.DeadJobs), AvailableJobs: healthZero(h.AvailableJobs),
		OldestAvailable: healthZero(time.Duration(h.OldestAvailable)), SuccessRate: healthZero(h.SuccessRate),
		FailedPerKind24h: healthZero(h.FailedPerKind24h), RunningFor: healthZero(time.Duration(h.RunningFor)),
		RetryRate: healthZero(h.RetryRate), CacheBytes: healthZero(h.CacheBytes), ExpiredEntries: healthZero(h.ExpiredEntries),
		HitRate: healthZero(h.HitRate), HitRateMinLookups: healthZero(h.HitRateMinLookups)}
	return cfg
}

// unparsableDatabase is printed for a database setting that is not a URL
// url.Parse reads: where its password is cannot be told, so none of it is
// shown.
const unparsableDatabase = redact.Unparsable

// maskDatabase hides the password of a database URL: the user-info
// password and a password query parameter (redact.URL). A URL that does
// not parse gives unparsableDatabase, never the raw string.
func maskDatabase(raw string) string {
	if !isPostgres(raw) && keywordDSN(raw) {
		return unparsableDatabase // host=… password=…: not a URL
	}
	return redact.URL(raw)
}

// printConfig writes c as TOML with secrets masked.
func printConfig(c *ServeConfig) (string, error) {
	masked := *c
	masked.Database = maskDatabase(c.Database)
	data, err := gotoml.Marshal(&masked)
	if err != nil {
		return "", fmt.Errorf("print config: %w", err)
	}
	return string(data), nil
}

// configKeys lists every flat key with a default, sorted (for docs and tests).
func configKeys() []string {
	keys := make([]string, 0, len(configDefaults()))
	for k := range configDefaults() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// configMap is c with secrets masked as a map keyed like the TOML file
// (for --print-config --json).
func configMap(c *ServeConfig) (map[string]any, error) {
	text, err := printConfig(c)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := gotoml.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("print config: %w", err)
	}
	return m, nil
}
