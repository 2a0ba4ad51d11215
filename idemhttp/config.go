package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	// DefaultMaxBodyBytes is the largest request body accepted (413 above).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultListLimit is the page size of lists when limit is not given.
	DefaultListLimit = 50
	// MaxListLimit is the largest page; larger limits are clamped to it.
	MaxListLimit = 500
	// DefaultMaxPageBytes is the most JSON bytes of jobs one list page
	// carries; a page ends early with next_cursor before it would pass it.
	DefaultMaxPageBytes = 8 << 20
	// MaxBatch is the most jobs in one POST /v1/jobs/batch.
	MaxBatch = 1000
	// MaxReplay is the most jobs one POST /v1/jobs/replay copies.
	MaxReplay = 10000
	// DefaultAuthCacheTTL is how long a verified API key is trusted without
	// asking the store again (a revoked key stops working within it).
	DefaultAuthCacheTTL = 5 * time.Second
	// DefaultReadyWriteWindow is how long a write that failed with a
	// storage failure keeps /readyz at 503 unless a write succeeds since.
	DefaultReadyWriteWindow = 10 * time.Second
	// DefaultMetricsCacheTTL is how old the job and record gauges of
	// /metrics may be: the store is read at most once per TTL.
	DefaultMetricsCacheTTL = 10 * time.Second
	// DefaultMetricsMaxQueues is how many queues get their own series in
	// /metrics; the others are summed under the queue "other".
	DefaultMetricsMaxQueues = 100
	// DefaultMaxHeaderBytes caps the request line and headers (431 above).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConns is how many connections one listener holds open.
	DefaultMaxConns = 1024
	// DefaultReadHeaderTimeout is how long a client may take to send headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is how long a client may take to send a request
	// with its body.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is how long a reply may take; a long-polling
	// claim extends its own deadline by its wait.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may idle.
	DefaultIdleTimeout = 2 * time.Minute
)

// Config configures a Server. A nil *Config uses every default.
type Config struct {
	// Logger receives request errors; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxBodyBytes caps request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxPageBytes caps the bytes of one list page; default
	// DefaultMaxPageBytes. A page always holds at least one job.
	MaxPageBytes int64
	// AuthCacheTTL: how long a verified key is cached; default
	// DefaultAuthCacheTTL; negative disables the cache.
	AuthCacheTTL time.Duration
	// Health holds the thresholds of GET /v1/health.
	Health HealthConfig
	// CORS configures cross-origin requests; off by default.
	CORS CORSConfig
	// SchemaVersion, when set, reports the applied and the expected schema
	// version for /readyz; default: the store's SchemaVersion method when
	// it has one, else the schema is not checked.
	SchemaVersion func(ctx context.Context) (applied, expected int, err error)
	// ReadyWriteWindow: /readyz answers 503 while an API write failed with
	// a storage failure (ErrUnavailable) within this window and no API
	// write succeeded since; default DefaultReadyWriteWindow.
	ReadyWriteWindow time.Duration
	// MetricsCacheTTL: how old the store gauges of /metrics may be; default
	// DefaultMetricsCacheTTL.
	MetricsCacheTTL time.Duration
	// MetricsMaxQueues: queues with their own series in /metrics; default
	// DefaultMetricsMaxQueues.
	MetricsMaxQueues int
	// MaxHeaderBytes, MaxConns, ReadHeaderTimeout, ReadTimeout,
	// WriteTimeout and IdleTimeout are the connection limits of
	// NewHTTPServer and Listener; zero takes the Default… constant.
	MaxHeaderBytes                                            int
	MaxConns                                                  int
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// Idempotency configures the Idempotency-Key middleware on the API's
	// own non-enqueue POSTs. Its Tenant is always the authenticated tenant,
	// and a 401 (a key revoked during a long poll) is never stored. Claim
	// replies are stored whatever their size (up to the largest claim of
	// MaxClaimLimit jobs), above MaxResponseBytes too, so that the retry of
	// a claim whose reply was lost gets the same jobs; so are the replies
	// of one job (complete, fail, cancel, retry, resolve, trigger).
	Idempotency MiddlewareConfig
}

func (c *Config) withDefaults() (*Config, error) {
	var cfg Config
	if c != nil {
		cfg = *c
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, errors.New("idemhttp config: MaxBodyBytes must be positive")
	}
	if cfg.MaxPageBytes == 0 {
		cfg.MaxPageBytes = DefaultMaxPageBytes
	}
	if cfg.MaxPageBytes < 0 {
		return nil, errors.New("idemhttp config: MaxPageBytes must be positive")
	}
	if cfg.AuthCacheTTL == 0 {
		cfg.AuthCacheTTL = DefaultAuthCacheTTL
	}
	if cfg.MetricsCacheTTL == 0 {
		cfg.MetricsCacheTTL = DefaultMetricsCacheTTL
	}
	if cfg.ReadyWriteWindow == 0 {
		cfg.ReadyWriteWindow = DefaultReadyWriteWindow
	}
	if cfg.ReadyWriteWindow < 0 {
		return nil, errors.New("idemhttp config: ReadyWriteWindow must not be negative")
	}
	if cfg.MetricsMaxQueues == 0 {
		cfg.MetricsMaxQueues = DefaultMetricsMaxQueues
	}
	if cfg.MetricsCacheTTL < 0 || cfg.MetricsMaxQueues < 0 {
		return nil, errors.New("idemhttp config: MetricsCacheTTL and MetricsMaxQueues must not be negative")
	}
	if err := cfg.connDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Health.withDefaults(); err != nil {
		return nil, fmt.Errorf("idemhttp config: %w", err)
	}
	if err := cfg.CORS.validate(); err != nil {
		return nil, fmt.Errorf("idemhttp config: %w", err)
	}
	if cfg.Idempotency.Now == nil {
		cfg.Idempotency.Now = cfg.Now
	}
	if cfg.Idempotency.Logger == nil {
		cfg.Idempotency.Logger = cfg.Logger
	}
	if cfg.Idempotency.MaxBodyBytes == 0 {
		cfg.Idempotency.MaxBodyBytes = cfg.MaxBodyBytes
	}
	return &cfg, nil
}

// Validate reports whether NewServer would accept c, naming the bad field.
func (c *Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// connDefaults fills in the connection limits.
func (c *Config) connDefaults() error {
	setDef := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setDef(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDef(&c.ReadTimeout, DefaultReadTimeout)
	setDef(&c.WriteTimeout, DefaultWriteTimeout)
	setDef(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxHeaderBytes < 0 || c.MaxConns < 0 || c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 ||
		c.WriteTimeout < 0 || c.IdleTimeout < 0 {
		return errors.New("idemhttp config: connection limits must not be negative")
	}
	return nil
}
