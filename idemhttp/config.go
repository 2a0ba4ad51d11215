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
	// MaxBatch is the most jobs in one POST /v1/jobs/batch.
	MaxBatch = 1000
	// MaxReplay is the most jobs one POST /v1/jobs/replay copies.
	MaxReplay = 10000
	// DefaultAuthCacheTTL is how long a verified API key is trusted without
	// asking the store again (a revoked key stops working within it).
	DefaultAuthCacheTTL = 5 * time.Second
)

// Config configures a Server. A nil *Config uses every default.
type Config struct {
	// Logger receives request errors; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxBodyBytes caps request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
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
	// Idempotency configures the Idempotency-Key middleware on the API's
	// own non-enqueue POSTs. Its Tenant is always the authenticated tenant.
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
	if cfg.AuthCacheTTL == 0 {
		cfg.AuthCacheTTL = DefaultAuthCacheTTL
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
