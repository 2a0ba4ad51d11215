package idemhttp

import (
	"context"
	"encoding/json"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Client is what the Server needs of the idem client; *idem.Client
// implements it. The server calls nothing else of it.
type Client interface {
	// EnqueueRaw validates p as ValidateEnqueue does before it writes
	// anything (POST /v1/jobs relies on it rather than validating twice).
	EnqueueRaw(ctx context.Context, p idem.EnqueueParams) (*idem.EnqueueResult, error)
	EnqueueMany(ctx context.Context, items []idem.EnqueueParams) ([]idem.EnqueueResult, error)
	ValidateEnqueue(p idem.EnqueueParams) error
	JobGet(ctx context.Context, tenant string, id int64) (*idem.JobRow, error)
	JobList(ctx context.Context, p *idem.JobListParams) ([]*idem.JobRow, int64, error)
	JobAttempts(ctx context.Context, tenant string, id int64) ([]*idem.Attempt, error)
	JobCancel(ctx context.Context, tenant string, id int64) (*idem.JobRow, error)
	JobRetry(ctx context.Context, tenant string, id int64, runAt time.Time) (*idem.JobRow, error)
	JobReplayReport(ctx context.Context, p *idem.ReplayParams) (*idem.JobReplayResult, error)
	DLQRequeue(ctx context.Context, ids []int64, filter idem.JobFilter) (int, error)
	DLQDelete(ctx context.Context, tenant string, id int64) error
	Claim(ctx context.Context, p idem.ClaimParams) ([]*idem.JobRow, error)
	Heartbeat(ctx context.Context, tenant string, id int64, token string, lease time.Duration) (time.Time, error)
	Complete(ctx context.Context, tenant string, id int64, token string, result json.RawMessage) (*idem.JobRow, error)
	Fail(ctx context.Context, tenant string, id int64, token string, p idem.FailParams) (*idem.JobRow, error)
	RecordGet(ctx context.Context, tenant, key string) (*idem.Record, error)
	RecordDelete(ctx context.Context, tenant, key string) error
	CacheStats(ctx context.Context, tenant string) (*idem.CacheStats, error)
	QueueStats(ctx context.Context, tenant string) ([]*store.QueueStat, error)
	TargetPut(ctx context.Context, t *idem.Target) (created bool, err error)
	TargetGet(ctx context.Context, tenant, name string) (*idem.Target, error)
	TargetList(ctx context.Context, tenant string) ([]*idem.Target, error)
	TargetDelete(ctx context.Context, tenant, name string) error
	TargetStats(ctx context.Context, opts *idem.TargetStatsOpts) ([]*idem.TargetStat, error)
	Publish(ctx context.Context, e *idem.Event) (*idem.PublishResult, error)
	EventList(ctx context.Context, f *idem.EventFilter, afterID int64, limit int) ([]*idem.Event, error)
	EventReplayKeyed(ctx context.Context, f *idem.EventFilter, subscription, key string) (*idem.ReplayResult, error)
	SubscriptionPut(ctx context.Context, s *idem.Subscription) (bool, error)
	SubscriptionGet(ctx context.Context, tenant, topic, name string) (*idem.Subscription, error)
	SubscriptionList(ctx context.Context, tenant, topic string) ([]*idem.Subscription, error)
	SubscriptionDelete(ctx context.Context, tenant, topic, name string) error
	BatchCancel(ctx context.Context, tenant string, id int64) (*idem.Batch, error)
	BatchCreate(ctx context.Context, p idem.BatchCreateParams) (*idem.Batch, error)
	BatchGet(ctx context.Context, tenant string, id int64) (*idem.Batch, error)
	DLQResolve(ctx context.Context, tenant string, id int64, note string) (*idem.JobRow, error)
	ResultLeaseAcquire(ctx context.Context, key string, opts *idem.ResultLeaseOpts) (*idem.ResultLease, error)
	ResultLeaseComplete(ctx context.Context, tenant, key, token string, result json.RawMessage, ttl, duration time.Duration) (*idem.DoResult, error)
	ResultLeaseRelease(ctx context.Context, tenant, key, token string) error
	ResultLeaseRenew(ctx context.Context, tenant, key, token string, lease time.Duration) (time.Time, error)
	LimitDelete(ctx context.Context, scope idem.FlowScope) error
	LimitList(ctx context.Context, tenant string) ([]*idem.Limit, error)
	LimitPut(ctx context.Context, l idem.Limit) (*idem.Limit, error)
	QueuePause(ctx context.Context, queue, tenant string) error
	QueuePauseList(ctx context.Context) ([]idem.FlowScope, error)
	QueueResume(ctx context.Context, queue, tenant string) error
	ScheduleDelete(ctx context.Context, tenant, name string) error
	ScheduleGet(ctx context.Context, tenant, name string) (*idem.ScheduleInfo, error)
	ScheduleList(ctx context.Context, tenant string) ([]*idem.ScheduleInfo, error)
	SchedulePut(ctx context.Context, s *idem.Schedule) (*idem.ScheduleInfo, error)
	ScheduleTrigger(ctx context.Context, tenant, name string, opts *idem.ScheduleTriggerOpts) (*idem.EnqueueResult, error)
}

// MiddlewareRecords is what Middleware needs of a store: the record
// methods that take, keep and give up the execution lease of a key. Every
// store.Records implements it.
type MiddlewareRecords interface {
	RecordAcquire(ctx context.Context, p *store.RecordAcquireParams) (*store.RecordAcquireResult, error)
	RecordComplete(ctx context.Context, p *store.RecordCompleteParams) error
	RecordRelease(ctx context.Context, p *store.RecordReleaseParams) error
	RecordRenew(ctx context.Context, p *store.RecordRenewParams) error
}

// Store is what the Server needs of the store beside the client: API keys
// for authentication, the records of its Idempotency-Key middleware, and
// the statistics of records and queues for metrics, the per-kind summary
// of /v1/stats and /v1/health, the running jobs /v1/health reads, and the
// cheap round trip of /readyz. Every store.Store implements it.
type Store interface {
	store.APIKeys
	MiddlewareRecords
	LimitList(ctx context.Context, p *store.LimitListParams) ([]*store.Limit, error)
	JobDurations(ctx context.Context, p *store.JobDurationsParams) ([]*store.JobDuration, error)
	RecordStats(ctx context.Context, p *store.RecordStatsParams) (*store.RecordStats, error)
	QueueStats(ctx context.Context, p *store.QueueStatsParams) ([]*store.QueueStat, error)
	JobKindStats(ctx context.Context, p *store.JobKindStatsParams) ([]*store.JobKindStat, error)
	JobList(ctx context.Context, p *store.JobListParams) ([]*idemtype.JobRow, int64, error)
	Ping(ctx context.Context) error
}

// Both implementations are checked here, where the interfaces are declared.
var (
	_ Client = (*idem.Client)(nil)
	_ Store  = store.Store(nil)
)
