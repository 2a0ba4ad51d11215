package idemtype

import (
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
