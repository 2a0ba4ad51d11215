package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/internal/notifier"
	"github.com/idem-dev/idem/store"
)

// Client is the entry point of the library: it inserts and manages jobs and,
// once started, works its queues. It is safe for concurrent use.
type Client struct {
	store  store.Store
	cfg    *Config
	logger *slog.Logger

	stats    clientStats
	exec     *executor.Executor // turns attempts into finishes
	targets  *targetSet         // delivery targets of jobs without a Go worker
	notifier *notifier.Notifier // wake-ups: producers, long polls, JobWait

	mu      sync.Mutex
	started bool
	stopped bool
	// stopDone is closed when the Stop that stops the runtime returns; a
	// concurrent Stop waits for it. nil until then.
	stopDone chan struct{}
	runtime  *runtime // nil until Start
}

// clientStats counts cache hits and misses in this process.
type clientStats struct {
	cacheHits   atomic.Int64 // jobs and Do calls answered from a cached result
	cacheMisses atomic.Int64 // executions that ran because nothing was cached
	dedupHits   atomic.Int64 // enqueues answered with an existing job
}

// NewClient returns a client on st. cfg may be nil.
func NewClient(st store.Store, cfg *Config) (*Client, error) {
	if st == nil {
		return nil, errors.New("new client: nil store")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	cl := &Client{store: st, cfg: c, logger: c.Logger}
	if cl.targets, err = newTargetSet(st, c.Delivery, cl.now); err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	if cl.exec, err = newExecutor(cl); err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	l, _ := st.(notifier.Listener)
	cl.notifier = notifier.New(l, c.Logger)
	if a, ok := st.(store.Announcer); ok && l == nil {
		// The store's own announcements (SQLite: a cancel's hold ended by
		// the rescuer or an acknowledged cancel) wake this process's claimers,
		// as a Listener store's NOTIFY does: heard while this client's
		// producers run (Start to Stop) or a long poll of it waits, so
		// clients made and dropped on one store leave no subscription.
		cl.notifier.Relay(a)
	}
	for i := range c.Schedules {
		if _, _, err := cl.scheduleSpec(&c.Schedules[i]); err != nil {
			return nil, fmt.Errorf("new client: schedule %q: %w", c.Schedules[i].Name, err)
		}
	}
	return cl, nil
}

// Store returns the store the client uses.
func (c *Client) Store() store.Store { return c.store }

func (c *Client) now() time.Time { return c.cfg.Now().UTC() }

// tenant returns t or the configured default tenant.
func (c *Client) tenant(t string) string {
	if t == "" {
		return c.cfg.Tenant
	}
	return t
}

// wake tells the local producer of queue that a job may be available.
func (c *Client) wake(queue string) { c.notifier.Inserted(queue) }

// JobGet returns a job of tenant ("" = the default tenant).
func (c *Client) JobGet(ctx context.Context, tenant string, id int64) (*JobRow, error) {
	return c.store.JobGet(ctx, &store.JobGetParams{Tenant: c.tenant(tenant), ID: id})
}

// JobListParams selects a page of jobs.
type JobListParams = store.JobListParams

// JobFilter selects jobs.
type JobFilter = store.JobFilter

// JobList returns a page of jobs, newest first, and the cursor of the next
// page (0 on the last one). Filter.Tenant "" means the default tenant; use
// JobListAll for every tenant. A nil p lists the first page of every job
// of the default tenant.
func (c *Client) JobList(ctx context.Context, p *JobListParams) ([]*JobRow, int64, error) {
	var q JobListParams
	if p != nil {
		q = *p
	}
	q.Filter.Tenant = c.tenant(q.Filter.Tenant)
	return c.jobList(ctx, &q)
}

// JobListAll is JobList across every tenant (for operators).
func (c *Client) JobListAll(ctx context.Context, p *JobListParams) ([]*JobRow, int64, error) {
	var q JobListParams
	if p != nil {
		q = *p
	}
	q.Filter.Tenant = ""
	return c.jobList(ctx, &q)
}

func (c *Client) jobList(ctx context.Context, p *JobListParams) ([]*JobRow, int64, error) {
	if p.Limit <= 0 {
		p.Limit = 50
	}
	p.Limit = min(p.Limit, 500)
	if err := ValidateFilter(&p.Filter); err != nil {
		return nil, 0, err
	}
	return c.store.JobList(ctx, p)
}

// JobCancel cancels a job. A running job's handler context is cancelled
// (cause ErrJobCancelled): at once in this process; in another, at once on
// PostgreSQL (the store announces the cancel with NOTIFY; one lost with a
// dropped LISTEN connection is found by a renewal at the reconnect) and at
// its next heartbeat (a third of the lease, cause ErrLeaseLost) on SQLite.
// The job is cancelled when JobCancel returns; a running job keeps its
// concurrency slot (and, of a FIFO partition, its partition) until its
// handler has returned (its worker acknowledges the cancel) or its lease
// ended, so no job runs beside it that a limit or its partition would have
// held back, and a job waiting for any outcome of it waits for that too
// (docs/state-machine.md, "FIFO partitions"). A finished job is
// ErrWrongState.
func (c *Client) JobCancel(ctx context.Context, tenant string, id int64) (*JobRow, error) {
	var voided store.Lease
	row, err := c.store.JobCancel(ctx, &store.JobCancelParams{
		Tenant: c.tenant(tenant), ID: id, Reason: "cancelled by request", Now: c.now(), Voided: &voided})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	rt := c.runtime
	c.mu.Unlock()
	if rt != nil {
		if voided.Token != "" {
			// Also a claim of this process that committed but has not
			// reached its producer yet: its handler must not start.
			rt.running.CancelVoided(voided, c.now(), c.cfg.LeaseDuration, ErrJobCancelled)
		} else {
			rt.running.Cancel(id, ErrJobCancelled)
		}
	}
	c.finished(id)
	return row, nil
}

// JobRetry makes a dead or cancelled job available again with its attempts
// reset (scheduled when runAt is in the future). Other states are ErrWrongState.
// A job that never started and whose dependency no longer exists is refused
// with ErrInvalid (store.RetryRefusal): that dependency may have died.
func (c *Client) JobRetry(ctx context.Context, tenant string, id int64, runAt time.Time) (*JobRow, error) {
	rows, err := c.store.JobRetryMany(ctx, &store.JobRetryManyParams{
		IDs: []int64{id}, Filter: store.JobFilter{Tenant: c.tenant(tenant)},
		FromStates: []JobState{StateDead, StateCancelled}, RunAt: runAt, Now: c.now()})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		if _, err := c.JobGet(ctx, tenant, id); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("retry job %d: %w", id, ErrWrongState)
	}
	c.wake(rows[0].Queue)
	return rows[0], nil
}

// DLQRequeue makes dead jobs available again, by ids or (ids empty) by
// filter, and returns how many moved. By filter it moves at most
// store.MaxBatch (1,000) jobs, the oldest, in one transaction; call it
// again for the rest. The dead-letter queue holds dead
// jobs only: a filter naming another state is ErrInvalid. Jobs JobRetryMany
// refuses (store.RetryRefusal) fail a requeue by ids (*store.RetryRefusedError,
// nothing moves) and are skipped by a requeue by filter. A requeue by
// filter leaves the resolved dead jobs (DLQResolve: dealt with, kept for
// audit) unless filter.Resolved is set; by ids it requeues what it names.
func (c *Client) DLQRequeue(ctx context.Context, ids []int64, filter JobFilter) (int, error) {
	filter.Tenant = c.tenant(filter.Tenant)
	if len(ids) == 0 && filter.Resolved == nil {
		unresolved := false
		filter.Resolved = &unresolved
	}
	if err := ValidateFilter(&filter); err != nil {
		return 0, err
	}
	for _, st := range filter.States {
		if st != StateDead {
			return 0, idemtype.Invalid("state", "the dead-letter queue holds dead jobs only, not %s", st)
		}
	}
	rows, err := c.store.JobRetryMany(ctx, &store.JobRetryManyParams{
		IDs: ids, Filter: filter, FromStates: []JobState{StateDead}, Now: c.now()})
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		c.wake(r.Queue)
	}
	return len(rows), nil
}

// DLQDelete deletes a dead job with its attempts; ErrNotFound if it is not dead.
func (c *Client) DLQDelete(ctx context.Context, tenant string, id int64) error {
	return c.store.JobDelete(ctx, &store.JobDeleteParams{Tenant: c.tenant(tenant), ID: id, State: StateDead})
}

// JobAttempts returns the attempts of a job, oldest first.
func (c *Client) JobAttempts(ctx context.Context, tenant string, id int64) ([]*Attempt, error) {
	return c.store.AttemptList(ctx, &store.AttemptListParams{Tenant: c.tenant(tenant), JobID: id})
}

// RecordGet returns the live idempotency record of key.
func (c *Client) RecordGet(ctx context.Context, tenant, key string) (*Record, error) {
	rec, err := c.store.RecordGet(ctx, &store.RecordGetParams{Tenant: c.tenant(tenant), Key: key, Now: c.now()})
	if err != nil {
		return nil, err
	}
	if rec.Compressed {
		if rec.Result, err = decodeResult(rec.Result, true); err != nil {
			return nil, fmt.Errorf("record %q: %w", key, err)
		}
		rec.Compressed = false
	}
	return rec, nil
}

// RecordDelete deletes an idempotency record so its key may be used again.
// A record whose key is held — a live lease (a Do, a result lease, an
// Idempotency-Key request in flight) or its job running under a live job
// lease — is not deleted: ErrKeyInProgress, since a new job or caller of
// the key would otherwise run beside the holder. Delete it once the holder
// finished (or its lease lapsed). ErrNotFound when there is no record.
func (c *Client) RecordDelete(ctx context.Context, tenant, key string) error {
	return c.store.RecordDelete(ctx, &store.RecordDeleteParams{Tenant: c.tenant(tenant), Key: key, Now: c.now()})
}

// CacheStats summarises the idempotency records and this process's cache
// hits and misses.
type CacheStats struct {
	store.RecordStats
	Hits      int64   // jobs and Do calls answered from the cache (this process)
	Misses    int64   // executions that ran (this process)
	DedupHits int64   // enqueues answered with an existing job (this process)
	HitRate   float64 // Hits / (Hits + Misses); 0 when both are 0
}

// CacheStats returns the statistics of the idempotency records of tenant
// ("" = every tenant).
func (c *Client) CacheStats(ctx context.Context, tenant string) (*CacheStats, error) {
	rs, err := c.store.RecordStats(ctx, &store.RecordStatsParams{Tenant: tenant, Now: c.now()})
	if err != nil {
		return nil, err
	}
	s := &CacheStats{RecordStats: *rs, Hits: c.stats.cacheHits.Load(),
		Misses: c.stats.cacheMisses.Load(), DedupHits: c.stats.dedupHits.Load()}
	if s.Hits+s.Misses > 0 {
		s.HitRate = float64(s.Hits) / float64(s.Hits+s.Misses)
	}
	return s, nil
}

// QueueStats counts jobs per queue and state for tenant ("" = every tenant).
func (c *Client) QueueStats(ctx context.Context, tenant string) ([]*store.QueueStat, error) {
	return c.store.QueueStats(ctx, &store.QueueStatsParams{Tenant: tenant, Now: c.now()})
}
