package idemtype

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by the runtime and the stores. The root package idem
// re-exports them; callers branch on them with errors.Is.
var (
	// ErrNotFound: no such job, record or key in the caller's tenant.
	ErrNotFound = errors.New("not found")
	// ErrKeyReused: an idempotency key was reused with a different request.
	ErrKeyReused = errors.New("idempotency key reused with a different request")
	// ErrLeaseLost: the caller's lease on a job or key is no longer valid
	// (expired and rescued, cancelled, released or completed by another).
	ErrLeaseLost = errors.New("lease lost")
	// ErrWrongState: the job is not in a state that allows the operation
	// (cancel of a finished job, retry of a running one, …).
	ErrWrongState = errors.New("job is not in a state that allows this")
	// ErrInvalid: the input is malformed; the error text says which field.
	ErrInvalid = errors.New("invalid input")
	// ErrConflict: concurrent changes kept the operation from completing (a
	// schedule replaced after each of a trigger's reads); nothing was done
	// and it may be retried at once. HTTP answers 409 with Retry-After.
	ErrConflict = errors.New("changed concurrently")
	// ErrKeyInProgress: an idempotency key is held by a live execution lease.
	ErrKeyInProgress = errors.New("idempotency key is in progress")
	// ErrJobTimeout: an attempt ran past its timeout; its handler's context
	// was cancelled and the attempt failed (retryable like any failure).
	ErrJobTimeout = errors.New("job timed out")
	// ErrJobCancelled: the job was cancelled (JobCancel, the API's cancel)
	// while it ran; the cause of its handler's context when the cancel
	// reached it directly (not through a refused lease renewal).
	ErrJobCancelled = errors.New("job cancelled")
	// ErrUnavailable: the storage could not be reached or written (database
	// unreachable, disk full, read-only file system); the request was not
	// carried out and may be retried later. HTTP answers 503 with
	// Retry-After.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrClosed: the store (or the client owning it) was closed.
	ErrClosed = errors.New("closed")
)

// KeyReusedError is returned when an idempotency key is reused with a
// different request; it carries the id of the job the key belongs to, or
// for an event key that of the event (EventID, JobID 0).
type KeyReusedError struct {
	Key     string
	JobID   int64
	EventID int64
}

// Error implements error.
func (e *KeyReusedError) Error() string {
	if e.JobID == 0 && e.EventID != 0 {
		return fmt.Sprintf("idempotency key %q reused with a different event (event %d)", e.Key, e.EventID)
	}
	return fmt.Sprintf("idempotency key %q reused with a different request (job %d)", e.Key, e.JobID)
}

// Unwrap makes errors.Is(err, ErrKeyReused) true.
func (e *KeyReusedError) Unwrap() error { return ErrKeyReused }

// InvalidError names the field that failed validation.
type InvalidError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *InvalidError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// Invalid returns an *InvalidError for field.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
