package idem

import (
	"github.com/idem-dev/idem/internal/maintenance"

	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Defaults of Config.
const (
	DefaultTenant             = idemtype.DefaultTenant
	DefaultQueue              = "default"
	DefaultMaxAttempts        = 5
	DefaultDedupWindow        = 7 * 24 * time.Hour
	DefaultResultTTL          = 7 * 24 * time.Hour
	DefaultLeaseDuration      = 30 * time.Second
	DefaultPollInterval       = 100 * time.Millisecond
	DefaultFetchLimit         = 100
	DefaultCompressThreshold  = 4096
	DefaultRescueInterval     = 5 * time.Second
	DefaultMaintenanceEvery   = time.Minute
	DefaultCompletedRetention = 30 * 24 * time.Hour
	DefaultCancelledRetention = 30 * 24 * time.Hour
	DefaultLeaderTTL          = 10 * time.Second
	DefaultMaxWorkers         = 10
	DefaultScheduleInterval   = maintenance.DefaultScheduleInterval
	DefaultScheduleGrace      = maintenance.DefaultScheduleGrace
)

// Config configures a Client. The zero value is valid: an insert-only client
// (no queues) with every default below.
type Config struct {
	// Logger receives the runtime's structured logs; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now. Tests inject a fixed clock.
	Now func() time.Time
	// Workers holds the handlers; required when Queues is not empty.
	Workers *Workers
	// Queues to work, with their per-process concurrency. Empty: the client
	// only inserts and manages jobs.
	Queues map[string]QueueConfig
	// WorkerID names this process in attempt records; default host-pid-random.
	WorkerID string
	// Tenant used when EnqueueOpts.Tenant is empty; default DefaultTenant.
	Tenant string

	// MaxAttempts per job when EnqueueOpts leaves it 0; default
	// DefaultMaxAttempts; at most MaxMaxAttempts.
	MaxAttempts int
	// Retry is the default backoff policy; RetryByQueue and RetryByKind
	// override it (kind wins over queue).
	Retry        RetryPolicy
	RetryByQueue map[string]RetryPolicy
	RetryByKind  map[string]RetryPolicy

	// DedupWindow is how long an idempotency key blocks the creation of
	// another job; default DefaultDedupWindow; negative = a window of 0
	// (the key blocks only while its job is unfinished, like
	// EnqueueOpts.DedupWindow 0).
	DedupWindow time.Duration
	// ResultTTL is how long a completed result is cached; default
	// DefaultResultTTL; ResultTTLByKind overrides it per kind (an entry of
	// 0 is no entry). Negative values are refused.
	ResultTTL       time.Duration
	ResultTTLByKind map[string]time.Duration
	// AutoKeyByQueue and AutoKeyByKind derive the idempotency key of jobs
	// enqueued without one (seed 002); the kind's entry wins. See AutoKey;
	// NewClient refuses an entry AutoKey.Validate refuses.
	AutoKeyByQueue map[string]AutoKey
	AutoKeyByKind  map[string]AutoKey
	// CompressThreshold: results larger than this many bytes are stored
	// gzip-compressed in the idempotency record; default
	// DefaultCompressThreshold; negative = never.
	CompressThreshold int

	// Timeout bounds one attempt of a Go worker: at the timeout the
	// handler's context is cancelled (cause ErrJobTimeout) and an error it
	// returns fails the attempt as a timeout, retried like any failure.
	// TimeoutByQueue and TimeoutByKind override it (kind wins over queue);
	// an entry of 0 is no entry (the next level decides, as a job's own
	// timeout of 0 does); 0 everywhere = no limit (the default).
	Timeout        time.Duration
	TimeoutByQueue map[string]time.Duration
	TimeoutByKind  map[string]time.Duration

	// LeaseDuration of a claim; heartbeats renew it every third of it.
	// Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// PollInterval is how often an idle queue looks for jobs it was not told
	// about (other processes, due scheduled jobs); default DefaultPollInterval;
	// negative is refused.
	PollInterval time.Duration
	// FetchLimit caps one claim; default DefaultFetchLimit.
	FetchLimit int

	// DisableMaintenance turns off the rescuer, retention and promoter
	// (they run on the elected leader only).
	DisableMaintenance bool
	// RescueInterval: how often expired leases are rescued; default
	// DefaultRescueInterval; negative is refused.
	RescueInterval time.Duration
	// MaintenanceInterval: how often retention runs; default
	// DefaultMaintenanceEvery; negative is refused.
	MaintenanceInterval time.Duration
	// CompletedRetention and CancelledRetention: finished jobs older than
	// this are deleted; defaults 30 days; negative keeps them.
	// DeadRetention 0 (or negative) keeps dead jobs.
	CompletedRetention time.Duration
	CancelledRetention time.Duration
	DeadRetention      time.Duration
	// LeaderTTL is the term of the maintenance leader; default
	// DefaultLeaderTTL; under 1ms is refused, and so is a term not under
	// ScheduleGrace unless DisableMaintenance is set (an
	// *idemtype.InvalidError, wrapping ErrInvalid, naming both fields).
	LeaderTTL time.Duration
	// Observer receives every job event (enqueued, deduplicated, claimed,
	// cache hit and miss, finished) for metrics and logs; nil = none.
	Observer Observer

	// Delivery configures the push of jobs to webhook targets (queues with
	// QueueConfig.Deliver); nil = defaults.
	Delivery *DeliveryConfig
	// TopicQueue is the queue of the delivery jobs of topic events; default
	// DefaultTopicQueue. Work it with QueueConfig.Deliver to deliver them.
	TopicQueue string
	// EventRetention is how long the event log keeps an event (replay
	// look-back), independent of the delivery jobs; default
	// DefaultEventRetention; negative keeps events forever.
	EventRetention time.Duration

	// Limits are stored (LimitPut) when the client starts, replacing the
	// limits of the same scopes; limits set through the API or CLI live in
	// the database as well. Seed 002's example: {FlowScope{Tenant: "t"},
	// Rate: 100, Period: time.Minute} and {FlowScope{Queue: "q"}, Rate:
	// 1000, Period: time.Minute}. None by default.
	Limits []Limit

	// Schedules are put (created or replaced) in the store by Start, so
	// every node sees them; the scheduler on the leader enqueues their
	// firings. Schedules put over the HTTP API or with SchedulePut are
	// kept: Start never deletes one.
	Schedules []Schedule
	// ScheduleInterval: how often the scheduler looks for due firings;
	// default DefaultScheduleInterval; negative is refused.
	ScheduleInterval time.Duration
	// ScheduleGrace: under MissedSkip, a firing found due later than this
	// after its time is missed; default DefaultScheduleGrace. It must be
	// longer than LeaderTTL (see there): a failover waits for the dead
	// leader's term to end, and the firings due meanwhile must still fit
	// in the grace. Leave room for the elector's renewal (a third of the
	// term) and ScheduleInterval as well.
	ScheduleGrace time.Duration
}

// QueueConfig configures one queue worked by a client.
type QueueConfig struct {
	// MaxWorkers is how many jobs of the queue this process runs at once;
	// default DefaultMaxWorkers.
	MaxWorkers int
	// Deliver: the queue's jobs whose kind has no Go worker are delivered to
	// their stored Target (Client.TargetPut) instead; the queue then claims
	// jobs of every kind.
	Deliver bool
}

// withDefaults returns a copy of c with every zero field defaulted, or an
// error naming the invalid field.
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
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.WorkerID = host + "-" + strconv.Itoa(os.Getpid()) + "-" + store.NewToken()[:6]
	}
	setDefault(&cfg.Tenant, DefaultTenant)
	setDefault(&cfg.MaxAttempts, DefaultMaxAttempts)
	setDefault(&cfg.DedupWindow, DefaultDedupWindow)
	cfg.DedupWindow = max(cfg.DedupWindow, 0)
	setDefault(&cfg.ResultTTL, DefaultResultTTL)
	setDefault(&cfg.CompressThreshold, DefaultCompressThreshold)
	setDefault(&cfg.LeaseDuration, DefaultLeaseDuration)
	setDefault(&cfg.PollInterval, DefaultPollInterval)
	setDefault(&cfg.FetchLimit, DefaultFetchLimit)
	setDefault(&cfg.RescueInterval, DefaultRescueInterval)
	setDefault(&cfg.MaintenanceInterval, DefaultMaintenanceEvery)
	setDefault(&cfg.CompletedRetention, DefaultCompletedRetention)
	setDefault(&cfg.CancelledRetention, DefaultCancelledRetention)
	setDefault(&cfg.LeaderTTL, DefaultLeaderTTL)
	setDefault(&cfg.TopicQueue, DefaultTopicQueue)
	setDefault(&cfg.EventRetention, DefaultEventRetention)
	setDefault(&cfg.ScheduleInterval, DefaultScheduleInterval)
	setDefault(&cfg.ScheduleGrace, DefaultScheduleGrace)
	if len(cfg.Queues) > 0 && cfg.Workers == nil {
		cfg.Workers = NewWorkers() // delivery-only queues need no Go worker
		for name, q := range cfg.Queues {
			if !q.Deliver {
				return nil, fmt.Errorf("config: queue %q needs Workers (or Deliver)", name)
			}
		}
	}
	queues := make(map[string]QueueConfig, len(cfg.Queues))
	for name, q := range cfg.Queues {
		if name == "" {
			return nil, errors.New("config: empty queue name")
		}
		setDefault(&q.MaxWorkers, DefaultMaxWorkers)
		if q.MaxWorkers < 0 {
			return nil, fmt.Errorf("config: queue %q: negative MaxWorkers", name)
		}
		queues[name] = q
	}
	cfg.Queues = queues
	if cfg.MaxAttempts < 1 || cfg.LeaseDuration < time.Second || cfg.FetchLimit < 1 {
		return nil, errors.New("config: MaxAttempts and FetchLimit must be positive, LeaseDuration at least 1s")
	}
	if cfg.MaxAttempts > MaxMaxAttempts {
		// Every job left to the default would be refused at its enqueue.
		return nil, fmt.Errorf("config: MaxAttempts %d is over a job's limit, %d", cfg.MaxAttempts, MaxMaxAttempts)
	}
	// The background services tick at these intervals (a non-positive
	// one would panic in the service's goroutine at Start); the elector
	// renews every third of LeaderTTL.
	for _, iv := range []struct {
		name string
		d    time.Duration
	}{{"PollInterval", cfg.PollInterval}, {"RescueInterval", cfg.RescueInterval},
		{"MaintenanceInterval", cfg.MaintenanceInterval}, {"ScheduleInterval", cfg.ScheduleInterval},
		{"ScheduleGrace", cfg.ScheduleGrace}} {
		if iv.d < 0 {
			return nil, fmt.Errorf("config: negative %s %v", iv.name, iv.d)
		}
	}
	if cfg.LeaderTTL < time.Millisecond {
		return nil, fmt.Errorf("config: LeaderTTL %v: want at least 1ms", cfg.LeaderTTL)
	}
	// A leader failover takes up to a leader term: with a term as long as
	// the grace, the firings due while the dead leader's term ran out are
	// missed under MissedSkip. Checked whenever this node may lead (the
	// scheduler runs every stored schedule, not only Config.Schedules).
	if !cfg.DisableMaintenance && cfg.LeaderTTL >= cfg.ScheduleGrace {
		return nil, fmt.Errorf("config: %w", idemtype.Invalid("LeaderTTL",
			"%v is not under ScheduleGrace %v: a leader failover would miss the firings of skip schedules", cfg.LeaderTTL, cfg.ScheduleGrace))
	}
	for _, d := range append([]time.Duration{cfg.Timeout}, mapValues(cfg.TimeoutByKind, cfg.TimeoutByQueue)...) {
		if d < 0 {
			return nil, errors.New("config: negative Timeout")
		}
	}
	// A negative result TTL would fail every enqueue (and every Do left to
	// the default) far from the setting; a kind's 0 is no entry.
	if cfg.ResultTTL < 0 {
		return nil, fmt.Errorf("config: negative ResultTTL %v (0 = the default, %v)", cfg.ResultTTL, DefaultResultTTL)
	}
	for kind, d := range cfg.ResultTTLByKind {
		if d < 0 {
			return nil, fmt.Errorf("config: ResultTTLByKind[%q]: negative %v (0 = Config.ResultTTL)", kind, d)
		}
	}
	if err := cfg.Retry.validate(); err != nil {
		return nil, fmt.Errorf("config: Retry: %w", err)
	}
	for field, m := range map[string]map[string]RetryPolicy{"RetryByKind": cfg.RetryByKind, "RetryByQueue": cfg.RetryByQueue} {
		for name, p := range m {
			if err := p.validate(); err != nil {
				return nil, fmt.Errorf("config: %s[%q]: %w", field, name, err)
			}
		}
	}
	for _, l := range cfg.Limits {
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("config: limits: %w", err)
		}
	}
	if err := cfg.validateAutoKeys(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if cfg.Tenant == EveryTenant {
		return nil, fmt.Errorf("config: tenant %q is reserved for default limits", EveryTenant)
	}
	return &cfg, nil
}

// setDefault sets *v to def when it is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func mapValues[K comparable, V any](ms ...map[K]V) []V {
	var out []V
	for _, m := range ms {
		for _, v := range m {
			out = append(out, v)
		}
	}
	return out
}

// retryPolicy returns the policy for a job: its own, else by kind, else by
// queue, else the default.
func (c *Config) retryPolicy(row *JobRow) RetryPolicy {
	if len(row.RetryPolicy) > 0 {
		var p RetryPolicy
		if err := json.Unmarshal(row.RetryPolicy, &p); err == nil {
			return p
		}
	}
	return c.queueRetryPolicy(row.Queue, row.Kind)
}

func (c *Config) queueRetryPolicy(queue, kind string) RetryPolicy {
	if p, ok := c.RetryByKind[kind]; ok {
		return p
	}
	if p, ok := c.RetryByQueue[queue]; ok {
		return p
	}
	return c.Retry
}

// timeout returns how long one attempt of row may run: the job's own, else
// by kind, else by queue, else Timeout; 0 at a level is no value there (the
// next level decides), 0 everywhere = no limit.
func (c *Config) timeout(row *JobRow) time.Duration {
	if row.Timeout > 0 {
		return row.Timeout
	}
	if d := c.TimeoutByKind[row.Kind]; d > 0 {
		return d
	}
	if d := c.TimeoutByQueue[row.Queue]; d > 0 {
		return d
	}
	return c.Timeout
}

// resultTTL returns the result TTL of a kind.
func (c *Config) resultTTL(kind string) time.Duration {
	if d, ok := c.ResultTTLByKind[kind]; ok && d > 0 {
		return d
	}
	return c.ResultTTL
}
