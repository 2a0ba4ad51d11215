package idemtype

import (
	"errors"
	"fmt"
	"time"
)

// ControlKind is what a handler's control error asks for.
type ControlKind int

// The control flows a handler can return (see idem.JobSnooze and friends).
const (
	ControlSnooze ControlKind = iota + 1
	ControlRetryAfter
	ControlPermanent
	ControlCancel
)

// ControlError is the handler control flow a worker returns: built by
// idem.JobSnooze, JobRetryAfter, JobPermanent and JobCancel, read by the
// executor with errors.As.
type ControlError struct {
	Kind  ControlKind
	After time.Duration // snooze or retry delay
	Err   error         // the cause; nil for a snooze
}

// Error describes the control flow.
func (e *ControlError) Error() string {
	switch e.Kind {
	case ControlSnooze:
		return fmt.Sprintf("snooze %s", e.After)
	case ControlRetryAfter:
		return fmt.Sprintf("retry after %s: %v", e.After, e.Err)
	case ControlPermanent:
		return fmt.Sprintf("permanent failure: %v", e.Err)
	default:
		return fmt.Sprintf("cancelled: %v", e.Err)
	}
}

// Unwrap returns the cause.
func (e *ControlError) Unwrap() error { return e.Err }

// CodedError is a failure with an error code (seed 004's error_code): built
// by idem.JobErrorCode, read by the executor with ErrorCodeOf and stored as
// the job's ErrorCode.
type CodedError struct {
	Code string
	Err  error
}

// Error returns the cause's message prefixed by the code.
func (e *CodedError) Error() string { return fmt.Sprintf("%s: %v", e.Code, e.Err) }

// Unwrap returns the cause.
func (e *CodedError) Unwrap() error { return e.Err }

// ErrorCodeOf returns the code of the outermost CodedError in err's chain,
// or "" when there is none.
func ErrorCodeOf(err error) string {
	var ce *CodedError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}
