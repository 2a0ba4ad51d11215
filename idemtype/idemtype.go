// Package idemtype holds the low-level types shared by the idem runtime, the
// store seam and the store backends. It exists to break import cycles: the
// root package idem, package store and every backend import it, and it
// imports nothing of idem's own.
package idemtype

import (
	"encoding/json"
	"time"
)

// DefaultTenant is the tenant of jobs and keys when none is given.
const DefaultTenant = "default"

// JobState is the state of a job. See docs/state-machine.md for the
// transitions between states.
type JobState string

// The job states.
const (
	// StatePending: waiting for every job in DependsOn to complete.
	StatePending JobState = "pending"
	// StateScheduled: waiting for RunAt (or snoozed).
	StateScheduled JobState = "scheduled"
	// StateAvailable: ready to be claimed.
	StateAvailable JobState = "available"
	// StateRunning: claimed by a worker holding a lease.
	StateRunning JobState = "running"
	// StateRetryable: failed an attempt; claimable again from RunAt.
	StateRetryable JobState = "retryable"
	// StateCompleted: finished successfully (a final state).
	StateCompleted JobState = "completed"
	// StateDead: attempts exhausted or permanent failure; the dead-letter queue (final).
	StateDead JobState = "dead"
	// StateCancelled: cancelled by a user, a handler or a failed dependency (final).
	StateCancelled JobState = "cancelled"
)

// AllStates lists every job state in lifecycle order.
var AllStates = []JobState{StatePending, StateScheduled, StateAvailable, StateRunning,
	StateRetryable, StateCompleted, StateDead, StateCancelled}

// Valid reports whether s is a known state.
func (s JobState) Valid() bool {
	for _, k := range AllStates {
		if s == k {
			return true
		}
	}
	return false
}

// Finished reports whether s is a final state (completed, dead or cancelled).
func (s JobState) Finished() bool {
	return s == StateCompleted || s == StateDead || s == StateCancelled
}

// JobRow is one job as stored.
type JobRow struct {
	ID           int64           // assigned by the store, increasing in enqueue order
	Tenant       string          // never empty; "default" when not given
	Queue        string          // never empty; "default" when not given
	Kind         string          // the handler that runs it
	Args         json.RawMessage // JSON; "{}" when not given
	State        JobState        //
	Priority     int             // higher runs first; default 0
	Attempt      int             // attempts started so far (a claim increments it)
	MaxAttempts  int             // attempts allowed before the job is dead
	RunAt        time.Time       // not claimable before this time
	CreatedAt    time.Time       //
	StartedAt    *time.Time      // start of the latest attempt
	FinishedAt   *time.Time      // set in a final state
	PartitionKey string          // FIFO partition within the queue; "" = none
	// IdempotencyKey is the key that deduplicates creation and caches the
	// result; "" = none. Scoped by Tenant.
	IdempotencyKey string
	DependsOn      []int64         // jobs that must complete first
	Result         json.RawMessage // set when completed (nil otherwise)
	WasCached      bool            // completed from the result cache without running
	OriginalJobID  int64           // the job whose cached result this is; 0 = none
	LastError      string          // error of the latest failed attempt
	Metadata       json.RawMessage // free JSON for the user; nil = none
	// RetryPolicy is the job's own backoff policy as JSON (the root package
	// defines its form); nil = the queue's or kind's policy.
	RetryPolicy json.RawMessage
	// ErrorCode is the code of the latest failed attempt (seed 004's
	// error_code, set with idem.JobErrorCode or a pull worker's fail);
	// "" = none.
	ErrorCode string
	// ResolvedAt is when a dead job was marked resolved (seed 002's
	// resolved_at); nil while unresolved. A resolved job stays dead, kept
	// for audit, and leaves the unresolved count of the dead-letter queue.
	ResolvedAt *time.Time
	// ResolutionNote is the note given when the job was resolved.
	ResolutionNote string
	// Timeout is the job's own limit on one attempt (0 = the queue's or
	// kind's, if any).
	Timeout time.Duration
	// Lease fields are set while running.
	LeaseToken     string
	LeaseExpiresAt *time.Time
	WorkerID       string
	// KeyHeld is set only on the jobs a claim returns: the claim found the
	// record of the job's IdempotencyKey naming this job, in progress, not
	// expired and storing no lease, so the running job holds the key's
	// execution lease by its own lease (RecordAcquire would answer
	// Acquired without writing) and its attempt need not acquire the key.
	// False means "not known": acquire it. Not stored.
	KeyHeld bool
	// Held is set on a job cancelled while it ran whose handler may still
	// run: the store keeps the cancelled attempt's lease (its hold,
	// docs/state-machine.md, "FIFO partitions") until the handler's
	// refused finish acknowledges the cancel or the lease ends. While it
	// is set, the job is cancelled but not done with: it keeps its FIFO
	// partition and limit slots, and the jobs that wait for any outcome of
	// it (DependsOnFinished, a batch's completion job) still wait. Read
	// from the job row, not a column of its own.
	Held bool
}

// Batch is a group of jobs created together under one key (seed 001): its
// jobs carry its id and its counts are theirs.
type Batch struct {
	ID        int64
	Tenant    string
	Key       string
	CreatedAt time.Time
	Metadata  json.RawMessage // nil = none
	// OnFinishJobID is the batch's completion job (0 = none): it waits
	// until every job of the batch has finished, whatever the outcome.
	OnFinishJobID int64
}

// Outcome is how an attempt ended.
type Outcome string

// The attempt outcomes.
const (
	OutcomeRunning   Outcome = "running"   // not finished yet
	OutcomeCompleted Outcome = "completed" // handler succeeded
	OutcomeCached    Outcome = "cached"    // completed from the result cache
	OutcomeFailed    Outcome = "failed"    // handler failed; retried later
	OutcomeDead      Outcome = "dead"      // failed for the last time or permanently
	OutcomeCancelled Outcome = "cancelled" // cancelled while running
	OutcomeSnoozed   Outcome = "snoozed"   // handler asked to run later, no attempt used
	OutcomeLost      Outcome = "lost"      // lease expired; rescued
	OutcomeReleased  Outcome = "released"  // lease given back at shutdown, no attempt used
)

// Attempt is the record of one attempt of a job.
type Attempt struct {
	JobID      int64
	Attempt    int
	StartedAt  time.Time
	FinishedAt *time.Time
	DurationMS int64
	Outcome    Outcome
	Error      string // with the stack for a recovered panic
	WorkerID   string
	Target     string // delivery target (webhook URL) when there is one
	HTTPStatus int    // 0 when not an HTTP delivery
}

// RecordStatus is the status of an idempotency record.
type RecordStatus string

// The record statuses.
const (
	RecordInProgress RecordStatus = "in_progress"
	RecordCompleted  RecordStatus = "completed"
	// RecordFailed: the record's job is dead or cancelled without a result
	// (seed 002's "failed"). It is computed when the record is read, so a
	// requeued job's record reads in_progress again.
	RecordFailed RecordStatus = "failed"
)

// Record is an idempotency record: (tenant, key) → status, owning job and,
// once completed, the cached result.
type Record struct {
	Tenant      string
	Key         string
	Status      RecordStatus
	Fingerprint string // hex SHA-256 of the canonical request that created the key
	JobID       int64  // the job created with the key (latest, when the window reopened)
	// ResultJobID is the job whose result is cached; 0 while none is.
	ResultJobID int64
	Result      []byte // the result as stored by the caller (decompressed)
	ResultHash  string // hex SHA-256 of Result
	SizeBytes   int64  // stored size (compressed size when compressed)
	Compressed  bool
	LeaseOwner  string     // who holds the execution lease ("" = nobody)
	LeaseUntil  *time.Time // when the execution lease expires
	CreatedAt   time.Time
	CompletedAt *time.Time
	// DedupUntil is when the key stops blocking creation of new jobs; nil
	// while it blocks until its job finishes (a dedup window of 0).
	DedupUntil *time.Time
	// ExpiresAt is when the record is deleted. While it depends on an
	// unfinished job (a dedup window of 0) nothing is stored and reads
	// (RecordGet) project it: the job's earliest finish (now, its run_at
	// or its lease's end, whichever is latest) plus its result TTL — a
	// time that moves with the job until it finishes.
	ExpiresAt *time.Time
	// ResultExpiresAt is when the cached result expires (CompletedAt plus
	// the result TTL); nil while none is stored. It may come before
	// ExpiresAt: the record then stays until its dedup window ends, so a
	// repeat of the key still gets its job, but it holds no result (Result
	// nil, SizeBytes 0) and the next run of the key runs again.
	ResultExpiresAt *time.Time
	DurationMS      int64
}
