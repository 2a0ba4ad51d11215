package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Defaults of HealthConfig: the thresholds of seeds 003 (queue), 004 (jobs)
// and 000 (result cache).
const (
	// DefaultHealthDeadJobs: more dead jobs than this is unhealthy.
	DefaultHealthDeadJobs = 100
	// DefaultHealthAvailableJobs: more available jobs than this is degraded.
	DefaultHealthAvailableJobs = 1000
	// DefaultHealthOldestAvailable: an available job older than this is degraded.
	DefaultHealthOldestAvailable = 5 * time.Minute
	// DefaultHealthSuccessRate: a success rate over the last minute below
	// this is degraded.
	DefaultHealthSuccessRate = 0.95
	// DefaultHealthFailedPerKind24h: more failed (retryable or dead) jobs
	// of one kind created in the last 24 h than this is degraded.
	DefaultHealthFailedPerKind24h = 5
	// DefaultHealthRunningFor: a job running longer than this is degraded.
	DefaultHealthRunningFor = 30 * time.Minute
	// DefaultHealthRetryRate: more than this share of the jobs created in
	// the last 24 h needing a retry is degraded.
	DefaultHealthRetryRate = 0.10
	// DefaultHealthCacheBytes: stored results larger than this (1 GB) is degraded.
	DefaultHealthCacheBytes = 1 << 30
	// DefaultHealthExpiredEntries: more expired records not yet deleted
	// than this means retention is not running: degraded.
	DefaultHealthExpiredEntries = 10000
	// DefaultHealthHitRate: a cache hit rate below this is degraded, once
	// at least DefaultHealthHitRateMinLookups lookups were counted.
	DefaultHealthHitRate = 0.05
	// DefaultHealthHitRateMinLookups: fewer lookups than this never grade
	// the hit rate.
	DefaultHealthHitRateMinLookups = 100
	// runningPage is the page size longestRunning reads running jobs by.
	runningPage = 500
)

// Health statuses.
const (
	StatusHealthy   = "healthy"
	StatusDegraded  = "degraded"
	StatusUnhealthy = "unhealthy"
)

// HealthZero, in a field of HealthConfig, is a threshold of 0 (a zero
// field takes the default): DeadJobs HealthZero makes any dead job
// unhealthy, SuccessRate HealthZero never finds the success rate too low.
// Other negative values are refused.
const HealthZero = -1

// HealthConfig holds the thresholds of GET /v1/health; zero fields take
// the defaults, HealthZero is a threshold of 0.
type HealthConfig struct {
	DeadJobs          int64         // > → unhealthy; default DefaultHealthDeadJobs
	AvailableJobs     int64         // > → degraded; default DefaultHealthAvailableJobs
	OldestAvailable   time.Duration // > → degraded; default DefaultHealthOldestAvailable
	SuccessRate       float64       // < → degraded; default DefaultHealthSuccessRate
	FailedPerKind24h  int64         // > → degraded; default DefaultHealthFailedPerKind24h
	RunningFor        time.Duration // > → degraded; default DefaultHealthRunningFor
	RetryRate         float64       // > → degraded; default DefaultHealthRetryRate
	CacheBytes        int64         // > → degraded; default DefaultHealthCacheBytes
	ExpiredEntries    int64         // > → degraded; default DefaultHealthExpiredEntries
	HitRate           float64       // < → degraded; default DefaultHealthHitRate
	HitRateMinLookups int64         // default DefaultHealthHitRateMinLookups
}

// healthDefault sets a zero threshold to d and HealthZero to 0.
func healthDefault[T int64 | time.Duration | float64](v *T, d T) {
	switch *v {
	case 0:
		*v = d
	case HealthZero:
		*v = 0
	}
}

func (h *HealthConfig) withDefaults() error {
	def, defDur, defRate := healthDefault[int64], healthDefault[time.Duration], healthDefault[float64]
	def(&h.DeadJobs, DefaultHealthDeadJobs)
	def(&h.AvailableJobs, DefaultHealthAvailableJobs)
	def(&h.FailedPerKind24h, DefaultHealthFailedPerKind24h)
	def(&h.CacheBytes, DefaultHealthCacheBytes)
	def(&h.ExpiredEntries, DefaultHealthExpiredEntries)
	def(&h.HitRateMinLookups, DefaultHealthHitRateMinLookups)
	defDur(&h.OldestAvailable, DefaultHealthOldestAvailable)
	defDur(&h.RunningFor, DefaultHealthRunningFor)
	defRate(&h.SuccessRate, DefaultHealthSuccessRate)
	defRate(&h.RetryRate, DefaultHealthRetryRate)
	defRate(&h.HitRate, DefaultHealthHitRate)
	for name, v := range map[string]float64{"SuccessRate": h.SuccessRate, "RetryRate": h.RetryRate, "HitRate": h.HitRate} {
		if v < 0 || v > 1 {
			return fmt.Errorf("health %s %v: want a share between 0 and 1", name, v)
		}
	}
	if h.DeadJobs < 0 || h.AvailableJobs < 0 || h.FailedPerKind24h < 0 || h.CacheBytes < 0 ||
		h.ExpiredEntries < 0 || h.HitRateMinLookups < 0 || h.OldestAvailable < 0 || h.RunningFor < 0 {
		return errors.New("health thresholds must not be negative")
	}
	return nil
}

// Check is one named health check.
type Check struct {
	Status    string  `json:"status"` // healthy, degraded or unhealthy
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Detail    string  `json:"detail,omitempty"`
}

// Health is the reply of GET /v1/health.
type Health struct {
	Status string           `json:"status"`
	Checks map[string]Check `json:"checks"`
}

// grade returns bad's status or healthy.
func grade(bad bool, level string) string {
	if bad {
		return level
	}
	return StatusHealthy
}

// worst is the overall status of checks.
func worst(checks map[string]Check) string {
	status := StatusHealthy
	for _, c := range checks {
		switch {
		case c.Status == StatusUnhealthy:
			status = StatusUnhealthy
		case c.Status == StatusDegraded && status == StatusHealthy:
			status = StatusDegraded
		}
	}
	return status
}

// health evaluates every check for tenant ("" = every tenant).
func (s *Server) health(ctx context.Context, tenant string) (*Health, error) {
	checks := map[string]Check{}
	if err := s.queueChecks(ctx, tenant, checks); err != nil {
		return nil, err
	}
	if err := s.jobChecks(ctx, tenant, checks); err != nil {
		return nil, err
	}
	if err := s.cacheChecks(ctx, tenant, checks); err != nil {
		return nil, err
	}
	return &Health{Status: worst(checks), Checks: checks}, nil
}

// queueChecks are seed 003's: dead, available, oldest available, success rate.
func (s *Server) queueChecks(ctx context.Context, tenant string, checks map[string]Check) error {
	list, err := s.store.QueueStats(ctx, &store.QueueStatsParams{Tenant: tenant, Now: s.now()})
	if err != nil {
		return fmt.Errorf("queue stats: %w", err)
	}
	var dead, avail, done, failed int64
	var oldest time.Duration
	for _, q := range list {
		dead += q.DeadUnresolved // resolved dead letters are kept for audit only
		avail += q.Counts[idemtype.StateAvailable]
		done += q.Completed1m
		failed += q.Failed1m
		if q.OldestAvailable != nil {
			oldest = max(oldest, s.now().Sub(*q.OldestAvailable))
		}
	}
	hc := s.cfg.Health
	checks["dead_jobs"] = Check{Status: grade(dead > hc.DeadJobs, StatusUnhealthy), Value: float64(dead), Threshold: float64(hc.DeadJobs)}
	checks["available_jobs"] = Check{Status: grade(avail > hc.AvailableJobs, StatusDegraded), Value: float64(avail), Threshold: float64(hc.AvailableJobs)}
	checks["oldest_available_s"] = Check{Status: grade(oldest > hc.OldestAvailable, StatusDegraded),
		Value: oldest.Seconds(), Threshold: hc.OldestAvailable.Seconds()}
	rate := 1.0
	if done+failed > 0 {
		rate = float64(done) / float64(done+failed)
	}
	checks["success_rate_1m"] = Check{Status: grade(rate < hc.SuccessRate, StatusDegraded), Value: rate, Threshold: hc.SuccessRate,
		Detail: fmt.Sprintf("%d completed, %d failed in the last minute", done, failed)}
	return nil
}

// jobChecks are seed 004's: failed per kind in 24 h, long-running jobs,
// retry rate. The 24 h checks count every job created in the last 24 hours
// (store.JobKindStats, the figures of /v1/stats kinds).
func (s *Server) jobChecks(ctx context.Context, tenant string, checks map[string]Check) error {
	now, hc := s.now(), s.cfg.Health
	kinds, err := s.kindStats24h(ctx, tenant)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	var worstKind string
	var most, started, retried int64
	for _, k := range kinds { // sorted by kind: the first of equals wins
		if k.Failed > most {
			worstKind, most = k.Kind, k.Failed
		}
		started += k.Started
		retried += k.Retried
	}
	c := Check{Status: grade(most > hc.FailedPerKind24h, StatusDegraded), Value: float64(most), Threshold: float64(hc.FailedPerKind24h)}
	if worstKind != "" {
		c.Detail = fmt.Sprintf("kind %q: %d failed jobs created in the last 24 h", worstKind, most)
	}
	checks["failed_per_kind_24h"] = c

	longest, err := s.longestRunning(ctx, tenant, now)
	if err != nil {
		return err
	}
	checks["longest_running_s"] = Check{Status: grade(longest > hc.RunningFor, StatusDegraded),
		Value: longest.Seconds(), Threshold: hc.RunningFor.Seconds()}

	rate := 0.0
	if started > 0 {
		rate = float64(retried) / float64(started)
	}
	checks["retry_rate_24h"] = Check{Status: grade(rate > hc.RetryRate, StatusDegraded), Value: rate, Threshold: hc.RetryRate,
		Detail: fmt.Sprintf("%d of %d started jobs created in the last 24 h needed a retry", retried, started)}
	return nil
}

// cacheChecks are seed 000's: size, expired entries left, hit rate.
func (s *Server) cacheChecks(ctx context.Context, tenant string, checks map[string]Check) error {
	cs, err := s.client.CacheStats(ctx, tenant)
	if err != nil {
		return fmt.Errorf("cache stats: %w", err)
	}
	if err := s.persistedCache(ctx, tenant, cs); err != nil {
		return fmt.Errorf("cache counters: %w", err)
	}
	hc := s.cfg.Health
	checks["cache_bytes"] = Check{Status: grade(cs.SizeBytes > hc.CacheBytes, StatusDegraded),
		Value: float64(cs.SizeBytes), Threshold: float64(hc.CacheBytes)}
	checks["cache_expired_entries"] = Check{Status: grade(cs.Expired > hc.ExpiredEntries, StatusDegraded),
		Value: float64(cs.Expired), Threshold: float64(hc.ExpiredEntries), Detail: "expired records not yet deleted by retention"}
	// No lookup yet: no rate to grade (as the success rate with no attempt).
	lookups := cs.Hits + cs.Misses
	checks["cache_hit_rate"] = Check{Status: grade(lookups > 0 && lookups >= hc.HitRateMinLookups && cs.HitRate < hc.HitRate, StatusDegraded),
		Value: cs.HitRate, Threshold: hc.HitRate, Detail: fmt.Sprintf("%d hits, %d misses", cs.Hits, cs.Misses)}
	return nil
}

// longestRunning is how long the longest-running job of tenant ("" =
// every tenant) has run. It reads every running job, page by page: the
// longest-running one is among the oldest, the last page of a newest-first
// list, so a sample of the newest would miss it whenever more than a page
// of jobs run (running jobs are bounded by the workers' concurrency).
func (s *Server) longestRunning(ctx context.Context, tenant string, now time.Time) (time.Duration, error) {
	var longest time.Duration
	p := &store.JobListParams{Filter: store.JobFilter{Tenant: tenant, States: []idemtype.JobState{idemtype.StateRunning}},
		Limit: runningPage}
	for {
		jobs, next, err := s.store.JobList(ctx, p)
		if err != nil {
			return 0, fmt.Errorf("health: list running jobs: %w", err)
		}
		for _, j := range jobs {
			if j.StartedAt != nil {
				longest = max(longest, now.Sub(*j.StartedAt))
			}
		}
		if next == 0 || len(jobs) == 0 {
			return longest, nil
		}
		p.Cursor = next
	}
}

// getHealth serves GET /v1/health: an admin key sees every tenant (or the
// one of X-Idem-Tenant), a tenant key its own tenant. 200 while healthy or
// degraded, 503 when unhealthy (API.md), with the checks in the body either
// way.
func (s *Server) getHealth(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r)
	if isAdmin(r) && r.Header.Get(headerTenant) == "" {
		tenant = ""
	}
	h, err := s.health(r.Context(), tenant)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if h.Status == StatusUnhealthy {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
	return nil
}

// healthz answers while the process is alive: it touches nothing else.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// schemaVersioner is implemented by the stores that can report their
// schema version.
type schemaVersioner interface {
	SchemaVersion(ctx context.Context) (applied, expected int, err error)
}

// readyCheckTimeout bounds the store round trips of /readyz.
const readyCheckTimeout = 5 * time.Second

// readyz answers 200 when this node can serve: the store answers, it can
// write (a write probe that changes no row, and no API write failed with a
// storage failure within ReadyWriteWindow unless one succeeded since) and
// its schema is at the version this binary expects, and it is not
// draining (Drain, called by Shutdown); 503 otherwise. Job counts
// never make a node unready (they are GET /v1/health's business).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyCheckTimeout)
	defer cancel()
	checks := map[string]Check{}
	// A trivial round trip: a stats query would count every job on each
	// probe (Kubernetes' default probe timeout is 1 s).
	if err := s.store.Ping(ctx); err != nil {
		checks["database"] = Check{Status: StatusUnhealthy, Detail: "the store did not answer: " + err.Error()}
	} else {
		checks["database"] = Check{Status: StatusHealthy}
	}
	checks["writes"] = s.writeCheck(ctx)
	if sv := s.schemaVersion(); sv != nil {
		applied, expected, err := sv(ctx)
		switch {
		case err != nil:
			checks["schema"] = Check{Status: StatusUnhealthy, Detail: "read schema version: " + err.Error()}
		case applied > expected: // `idem migrate` with this binary would apply nothing
			checks["schema"] = Check{Status: StatusUnhealthy, Value: float64(applied), Threshold: float64(expected),
				Detail: fmt.Sprintf("schema version %d is newer than this binary's %d: run the newer idem that migrated it", applied, expected)}
		case applied != expected:
			checks["schema"] = Check{Status: StatusUnhealthy, Value: float64(applied), Threshold: float64(expected),
				Detail: fmt.Sprintf("schema version %d, this binary expects %d: run `idem migrate`", applied, expected)}
		default:
			checks["schema"] = Check{Status: StatusHealthy, Value: float64(applied), Threshold: float64(expected)}
		}
	}
	if s.draining.Err() != nil {
		// Shutdown began: the API listener stops accepting (perhaps while a
		// separate ops listener still answers this probe).
		checks["draining"] = Check{Status: StatusUnhealthy, Detail: "the server is shutting down"}
	}
	status, code := StatusHealthy, http.StatusOK // API.md: {status:"healthy"|"unhealthy", checks}
	if worst(checks) != StatusHealthy {
		status, code = StatusUnhealthy, http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "checks": checks})
	return nil
}

// schemaVersion returns the configured schema version source, else the
// store's, else nil.
func (s *Server) schemaVersion() func(ctx context.Context) (int, int, error) {
	if s.cfg.SchemaVersion != nil {
		return s.cfg.SchemaVersion
	}
	if sv, ok := s.store.(schemaVersioner); ok {
		return sv.SchemaVersion
	}
	return nil
}
