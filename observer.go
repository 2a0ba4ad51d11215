package idem

import (
	"context"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// EventType says what happened to a job.
type EventType string

// The job events an Observer receives.
const (
	// EventEnqueued: a new job was inserted.
	EventEnqueued EventType = "enqueued"
	// EventDeduplicated: an enqueue met a live idempotency key; no job was made.
	EventDeduplicated EventType = "deduplicated"
	// EventClaimed: a worker (in-process or pull) took the job; Wait is set.
	// A pull claim is reported once it stands (a claim that fails, or
	// whose caller went away, gives its jobs back and is not reported);
	// likewise a Go worker's claim whose lease was over when it came back
	// (given back before its handler started) is not reported.
	EventClaimed EventType = "claimed"
	// EventCacheHit: a keyed job (or a Do call: JobID 0, no queue or
	// kind) was answered from a cached result; for a job, reported once
	// its cached finish is written, just before its EventFinished.
	EventCacheHit EventType = "cache_hit"
	// EventCacheMiss: a keyed job (or a Do call) found no cached result and
	// runs: reported as its handler starts (a pull job's, as it is handed out).
	EventCacheMiss EventType = "cache_miss"
	// EventFinished: an attempt ended; State, Outcome, Run and Err are set.
	// Reported once the finish is written: a finish the store did not take
	// (the job cancelled or rescued meanwhile, the store failing) is not
	// reported, and a finish replaced by a dead one (refused by the store
	// for its data) is reported as the dead one.
	EventFinished EventType = "finished"
	// EventRescued: the job's lease expired and the rescuer took it back
	// (on the maintenance leader); State is the state the rescue gave it.
	EventRescued EventType = "rescued"
)

// JobEvent is one event of one job. Observers must not keep the pointer
// beyond the call.
type JobEvent struct {
	Type    EventType
	JobID   int64
	Tenant  string
	Queue   string
	Kind    string
	Attempt int
	// State is the job's new state (EventFinished; EventRescued: the state
	// the rescue gave it), Outcome the attempt's outcome (EventFinished).
	State   idemtype.JobState
	Outcome idemtype.Outcome
	// Wait is the time from RunAt to the claim (EventClaimed); Run the
	// attempt's duration (EventFinished).
	Wait, Run time.Duration
	// Err is the attempt's error (EventFinished, failed outcomes).
	Err string
	// Panicked: the handler panicked (EventFinished), also after its
	// timeout; the executor recovered the panic and says so, so an error a
	// handler returns (or a pull worker's failure) is not Panicked
	// whatever its text.
	Panicked bool
}

// Observer receives job events as they happen, synchronously on the
// engine's goroutines: it must be fast and must not block (count, log,
// hand off). Set it as Config.Observer; nil means none.
type Observer interface {
	ObserveJob(e *JobEvent)
}

// MaintenanceEvent is one run of a maintenance service on the leader.
type MaintenanceEvent struct {
	// Service is "rescuer", "promoter", "retention" (deletes finished jobs,
	// expired idempotency records and old events: seed 000's cleanup) or
	// "scheduler".
	Service string
	// Rows is how many rows the run touched (deleted, rescued, promoted,
	// fired); a run that found nothing to do has 0.
	Rows int
	// Err is the run's error; nil when it succeeded.
	Err error
	// At is when the run ended, on the client's clock.
	At time.Time
}

// MaintenanceObserver is an Observer that is also told of every run of
// the maintenance services (which run on the elected leader only).
// Config.Observer is checked for it; like ObserveJob, ObserveMaintenance
// must be fast and must not block.
type MaintenanceObserver interface {
	Observer
	ObserveMaintenance(e *MaintenanceEvent)
}

// maintenanceHook returns the maintenance services' OnRun for the
// configured observer, or nil when it is no MaintenanceObserver.
func (c *Client) maintenanceHook() func(service string, rows int, err error) {
	mo, ok := c.cfg.Observer.(MaintenanceObserver)
	if !ok {
		return nil
	}
	return func(service string, rows int, err error) {
		mo.ObserveMaintenance(&MaintenanceEvent{Service: service, Rows: rows, Err: err, At: c.now()})
	}
}

// observe sends an event about row to the configured observer.
func (c *Client) observe(t EventType, row *JobRow, fill func(e *JobEvent)) {
	if c.cfg.Observer == nil || row == nil {
		return
	}
	e := &JobEvent{Type: t, JobID: row.ID, Tenant: row.Tenant, Queue: row.Queue, Kind: row.Kind, Attempt: row.Attempt}
	if fill != nil {
		fill(e)
	}
	c.cfg.Observer.ObserveJob(e)
}

// observeDo reports a cache hit or miss of Do (no job: JobID 0, Queue
// and Kind empty).
func (c *Client) observeDo(t EventType, tenant string) {
	if c.cfg.Observer != nil {
		c.cfg.Observer.ObserveJob(&JobEvent{Type: t, Tenant: tenant})
	}
}

// observeRescue reports rescued jobs as the rescue left them (the rows
// JobRescue returns, not a read after its commit: a job requeued, claimed
// again or deleted since is still reported with the rescue's state, queue
// and kind).
func (c *Client) observeRescue(_ context.Context, jobs []store.RescuedJob) {
	if c.cfg.Observer == nil {
		return
	}
	for _, j := range jobs {
		c.cfg.Observer.ObserveJob(&JobEvent{Type: EventRescued, JobID: j.ID, Tenant: j.Tenant, Queue: j.Queue,
			Kind: j.Kind, Attempt: j.Attempt, State: j.State})
	}
}

// observeClaim reports a claim at now.
func (c *Client) observeClaim(row *JobRow, now time.Time) {
	c.observe(EventClaimed, row, func(e *JobEvent) { e.Wait = max(0, now.Sub(row.RunAt)) })
}

// observeWritten reports a finish once it is written: a cache hit first
// when the job was answered from the cache (counted here, not when the key
// step found the result, so that a finish that is never written — its job
// claimed and answered again — is not counted twice), then the finish.
func (c *Client) observeWritten(row *JobRow, fin *store.JobFinishParams) {
	if fin.WasCached {
		c.stats.cacheHits.Add(1)
		c.observe(EventCacheHit, row, nil)
	}
	c.observeFinish(row, fin)
}

// observeFinish reports the end of an attempt described by fin.
func (c *Client) observeFinish(row *JobRow, fin *store.JobFinishParams) {
	c.observe(EventFinished, row, func(e *JobEvent) {
		e.State, e.Outcome, e.Err = fin.State, fin.Outcome, fin.Error
		e.Run = time.Duration(fin.DurationMS) * time.Millisecond
		e.Panicked = fin.Panicked
	})
}
