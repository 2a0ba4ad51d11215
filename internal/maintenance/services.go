package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/idem-dev/idem/store"
)

// Defaults of Config.
const (
	DefaultRescueInterval    = 5 * time.Second
	DefaultPromoteInterval   = time.Second
	DefaultRetentionInterval = time.Minute
	DefaultBatch             = 1000
	// DefaultRepairGrace is how long a job stays pending before the
	// rescuer checks its dependencies (Config.RepairGrace).
	DefaultRepairGrace = time.Minute
)

// Config configures every maintenance service.
type Config struct {
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// IsLeader gates every run; nil = always run.
	IsLeader func() bool
	// Interval between runs; default per service.
	Interval time.Duration
	// Batch is the most rows one run touches; default DefaultBatch.
	Batch int
	// Retention: finished jobs older than these are deleted; 0 keeps them.
	CompletedRetention time.Duration
	CancelledRetention time.Duration
	DeadRetention      time.Duration
	// EventRetention: events of the topics' event log older than this are
	// deleted; 0 keeps them.
	EventRetention time.Duration
	// OnPromote is told the queues that got available jobs (wake-ups).
	OnPromote func(queues []string)
	// OnRescue is told the jobs whose expired lease was rescued, as the
	// rescue left them (store.RescuedJob: read in its transaction, not
	// after it, so a later change of a job does not change its report).
	OnRescue func(ctx context.Context, jobs []store.RescuedJob)
	// RepairGrace: the rescuer repairs pending jobs whose release was
	// missed (store.Maintenance.JobDependantsRepair) once they are pending
	// this long; default DefaultRepairGrace. A release is made in the
	// transaction that finishes the last dependency, so the grace only
	// keeps the repair off jobs just inserted (and off clock skew between
	// nodes: creation times are the inserting nodes').
	RepairGrace time.Duration
	// ScheduleGrace: under the skip policy, a firing found due later than
	// this after its time is missed, not run; default DefaultScheduleGrace.
	ScheduleGrace time.Duration
	// OnRun is told of each run on the leader: the service's name
	// ("rescuer", "promoter", "retention", "scheduler"), the rows it
	// touched and its error (nil on success); nil = not told. It runs on
	// the service's goroutine and must not block.
	OnRun func(service string, rows int, err error)
}

func (c *Config) withDefaults(interval time.Duration) Config {
	var cfg Config
	if c != nil {
		cfg = *c
	}
	cfg.Logger = orDefault(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Interval = orDefault(cfg.Interval, interval)
	cfg.Batch = orDefault(cfg.Batch, DefaultBatch)
	cfg.RepairGrace = orDefault(cfg.RepairGrace, DefaultRepairGrace)
	return cfg
}

// Rescuer returns running jobs whose lease expired to retryable (or dead at
// their last attempt): a crashed worker's jobs run again elsewhere. It also
// repairs pending jobs whose release was missed (repairDependants).
type Rescuer struct {
	store store.Maintenance
	cfg   Config
	loop

	mu sync.Mutex
	// cursor is where the next repair of pending jobs resumes.
	cursor store.DependantsCursor
	// walkEnd bounds the walk under way (CreatedBefore of its calls): the
	// creation time before which it repairs, taken when it started.
	walkEnd time.Time
}

// NewRescuer returns a rescuer; cfg may be nil.
func NewRescuer(st store.Maintenance, cfg *Config) *Rescuer {
	r := &Rescuer{store: st, cfg: cfg.withDefaults(DefaultRescueInterval)}
	r.loop = loop{name: "rescuer", interval: r.cfg.Interval, logger: r.cfg.Logger, gate: r.cfg.IsLeader, fn: r.RunOnce, onRun: r.cfg.OnRun}
	return r
}

// RunOnce rescues every expired lease, in batches, then repairs one batch
// of pending jobs whose release was missed (repairDependants); it returns
// how many jobs it rescued or repaired.
func (r *Rescuer) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for {
		jobs, err := r.store.JobRescue(ctx, &store.JobRescueParams{Now: r.cfg.Now().UTC(), Limit: r.cfg.Batch})
		total += len(jobs)
		if len(jobs) > 0 && r.cfg.OnRescue != nil {
			r.cfg.OnRescue(ctx, jobs)
		}
		if err != nil || len(jobs) < r.cfg.Batch {
			// Wake the queues once for the whole run (its last batch may
			// be empty: a count that is a multiple of Batch).
			if err == nil {
				var released int
				released, err = r.repairDependants(ctx)
				total += released
			}
			if total > 0 && r.cfg.OnPromote != nil {
				r.cfg.OnPromote(nil)
			}
			return total, err
		}
	}
}

// repairDependants runs one bounded repair of the pending jobs whose
// release was missed (store.Maintenance.JobDependantsRepair): the next
// Batch pending jobs older than RepairGrace, from where the run before
// stopped, so each run reads at most Batch of them and a long-waiting
// pending job is read once per walk, not once per run. A walk takes the
// jobs created RepairGrace before its first run, not those created since:
// so it ends, and the next starts again from the oldest, even while new
// pending jobs come faster than Batch a run (a walk that took them in
// would follow them and never come back to a job it passed while that job
// still waited). A repair means a release path missed a job (an older
// node ending a hold, a bug): it is logged at Warn with the jobs' ids. It
// returns how many jobs it released or cancelled.
func (r *Rescuer) repairDependants(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now().UTC()
	if r.cursor == (store.DependantsCursor{}) {
		r.walkEnd = now.Add(-r.cfg.RepairGrace) // a new walk
	}
	res, err := r.store.JobDependantsRepair(ctx, &store.JobDependantsRepairParams{
		Now: now, CreatedBefore: r.walkEnd, After: r.cursor, Limit: r.cfg.Batch})
	if err != nil {
		return 0, err
	}
	r.cursor = res.Next
	n := len(res.Released) + len(res.Cancelled)
	if n > 0 {
		r.cfg.Logger.Warn("maintenance: repaired pending jobs whose dependencies had settled without releasing them",
			"released", res.Released, "cancelled", res.Cancelled)
	}
	return n, nil
}

// Promoter moves due scheduled and retryable jobs to available, so that
// lists and stats show them as such and other nodes are woken.
type Promoter struct {
	store store.Maintenance
	cfg   Config
	loop
}

// NewPromoter returns a promoter; cfg may be nil.
func NewPromoter(st store.Maintenance, cfg *Config) *Promoter {
	p := &Promoter{store: st, cfg: cfg.withDefaults(DefaultPromoteInterval)}
	p.loop = loop{name: "promoter", interval: p.cfg.Interval, logger: p.cfg.Logger, gate: p.cfg.IsLeader, fn: p.RunOnce, onRun: p.cfg.OnRun}
	return p
}

// RunOnce promotes one batch of due jobs and returns how many queues got jobs.
func (p *Promoter) RunOnce(ctx context.Context) (int, error) {
	queues, err := p.store.JobPromote(ctx, &store.JobPromoteParams{Now: p.cfg.Now().UTC(), Limit: p.cfg.Batch})
	if len(queues) > 0 && p.cfg.OnPromote != nil {
		p.cfg.OnPromote(queues)
	}
	return len(queues), err
}

// Retention deletes finished jobs past their retention, expired
// idempotency records and events past the event retention, in small
// batches. Records outlive job rows: a job an
// open dedup window points to is kept.
type Retention struct {
	store store.Maintenance
	cfg   Config
	loop
}

// NewRetention returns a retention service; cfg may be nil.
func NewRetention(st store.Maintenance, cfg *Config) *Retention {
	r := &Retention{store: st, cfg: cfg.withDefaults(DefaultRetentionInterval)}
	r.loop = loop{name: "retention", interval: r.cfg.Interval, logger: r.cfg.Logger, gate: r.cfg.IsLeader, fn: r.RunOnce, onRun: r.cfg.OnRun}
	return r
}

// RunOnce deletes what is due, batch after batch, and returns how many rows
// it deleted or emptied (a record whose cached result expired before its
// dedup window ends keeps its row without the result's bytes).
func (r *Retention) RunOnce(ctx context.Context) (int, error) {
	now := r.cfg.Now().UTC()
	before := func(d time.Duration) time.Time {
		if d <= 0 {
			return time.Time{}
		}
		return now.Add(-d)
	}
	p := &store.JobDeleteFinishedParams{
		CompletedBefore: before(r.cfg.CompletedRetention),
		CancelledBefore: before(r.cfg.CancelledRetention),
		DeadBefore:      before(r.cfg.DeadRetention),
		Limit:           r.cfg.Batch, Now: now,
	}
	total := 0
	for ctx.Err() == nil {
		n, err := r.store.JobDeleteFinished(ctx, p)
		total += n
		if err != nil {
			return total, err
		}
		if n < r.cfg.Batch {
			break
		}
	}
	for ctx.Err() == nil {
		n, err := r.store.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: now, Limit: r.cfg.Batch})
		total += n
		if err != nil {
			return total, err
		}
		if n < r.cfg.Batch {
			break
		}
	}
	for r.cfg.EventRetention > 0 && ctx.Err() == nil {
		n, err := r.store.EventDeleteBefore(ctx, &store.EventDeleteBeforeParams{Before: now.Add(-r.cfg.EventRetention), Limit: r.cfg.Batch})
		total += n
		if err != nil || n < r.cfg.Batch {
			return total, err
		}
	}
	return total, ctx.Err()
}
