package idem

import (
	"errors"
	"fmt"
	"time"
)

// controlError is the handler control flow a worker can return.
type controlError struct {
	kind  controlKind
	after time.Duration
	err   error
}

type controlKind int

const (
	controlSnooze controlKind = iota + 1
	controlRetryAfter
	controlPermanent
	controlCancel
)

func (e *controlError) Error() string {
	switch e.kind {
	case controlSnooze:
		return fmt.Sprintf("snooze %s", e.after)
	case controlRetryAfter:
		return fmt.Sprintf("retry after %s: %v", e.after, e.err)
	case controlPermanent:
		return fmt.Sprintf("permanent failure: %v", e.err)
	default:
		return fmt.Sprintf("cancelled: %v", e.err)
	}
}

func (e *controlError) Unwrap() error { return e.err }

// JobSnooze asks for the job to run again after d without using an attempt.
func JobSnooze(d time.Duration) error {
	return &controlError{kind: controlSnooze, after: max(d, 0)}
}

// JobRetryAfter fails the attempt and retries after d, overriding the backoff
// policy (the attempt counts; the job dies when attempts are exhausted).
func JobRetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &controlError{kind: controlRetryAfter, after: max(d, 0), err: err}
}

// JobPermanent fails the job for good: it goes straight to dead (the
// dead-letter queue) whatever attempts remain.
func JobPermanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &controlError{kind: controlPermanent, err: err}
}

// JobCancel cancels the job from its handler: no more attempts, state
// cancelled, dependants cancelled.
func JobCancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by handler")
	}
	return &controlError{kind: controlCancel, err: err}
}
