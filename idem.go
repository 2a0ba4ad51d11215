// Package idem runs durable jobs exactly once: idempotency keys, cached
// results, exactly-once job creation, retries with backoff, a dead-letter
// queue, FIFO partitions, dependencies and graceful shutdown, on an embedded
// SQLite file or on PostgreSQL.
//
// A Client inserts jobs into a store.Store and, when it has queues
// configured, works them with registered workers:
//
//	st, _ := sqlitestore.Open(ctx, "idem.db", nil)
//	workers := idem.NewWorkers()
//	idem.AddWorker(workers, &EmailWorker{})
//	client, _ := idem.NewClient(st, &idem.Config{Workers: workers,
//		Queues: map[string]idem.QueueConfig{"default": {MaxWorkers: 10}}})
//	client.Start(ctx)
//	res, _ := client.Enqueue(ctx, EmailArgs{To: "a@example.com"},
//		&idem.EnqueueOpts{IdempotencyKey: "welcome-42"})
//
// See docs/state-machine.md for the job states.
package idem

import "github.com/idem-dev/idem/idemtype"

// Re-exported shared types; see package idemtype.
type (
	// JobRow is a job as stored.
	JobRow = idemtype.JobRow
	// JobState is the state of a job.
	JobState = idemtype.JobState
	// Attempt is the record of one attempt.
	Attempt = idemtype.Attempt
	// Record is an idempotency record.
	Record = idemtype.Record
	// KeyReusedError carries the job (or event) that owns a reused key.
	KeyReusedError = idemtype.KeyReusedError
	// InvalidError is bad input: Field names the field at fault (wraps ErrInvalid).
	InvalidError = idemtype.InvalidError
)

// The job states.
const (
	StatePending   = idemtype.StatePending
	StateScheduled = idemtype.StateScheduled
	StateAvailable = idemtype.StateAvailable
	StateRunning   = idemtype.StateRunning
	StateRetryable = idemtype.StateRetryable
	StateCompleted = idemtype.StateCompleted
	StateDead      = idemtype.StateDead
	StateCancelled = idemtype.StateCancelled
)

// Errors callers branch on with errors.Is.
var (
	ErrNotFound      = idemtype.ErrNotFound
	ErrKeyReused     = idemtype.ErrKeyReused
	ErrLeaseLost     = idemtype.ErrLeaseLost
	ErrWrongState    = idemtype.ErrWrongState
	ErrInvalid       = idemtype.ErrInvalid
	ErrUnavailable   = idemtype.ErrUnavailable
	ErrKeyInProgress = idemtype.ErrKeyInProgress
	// ErrConflict: concurrent changes kept the operation from completing
	// (ScheduleTrigger of a schedule replaced again and again); retry.
	ErrConflict = idemtype.ErrConflict
	// ErrJobTimeout is the cause of a handler context cancelled at the job's
	// timeout (context.Cause), and wrapped by the attempt's error.
	ErrJobTimeout = idemtype.ErrJobTimeout
	// ErrJobCancelled is the cause of a handler context cancelled because
	// its job was cancelled (Client.JobCancel or the API's cancel) in this
	// process or, on PostgreSQL, announced by another; a cancel found by a
	// lease renewal instead (SQLite across processes) reads ErrLeaseLost.
	ErrJobCancelled = idemtype.ErrJobCancelled
)
