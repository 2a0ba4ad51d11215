package idem

import (
	"errors"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// JobSnooze asks for the job to run again after d without using an attempt.
func JobSnooze(d time.Duration) error {
	return &idemtype.ControlError{Kind: idemtype.ControlSnooze, After: max(d, 0)}
}

// JobRetryAfter fails the attempt and retries after d, overriding the backoff
// policy (the attempt counts; the job dies when attempts are exhausted).
func JobRetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &idemtype.ControlError{Kind: idemtype.ControlRetryAfter, After: max(d, 0), Err: err}
}

// JobPermanent fails the job for good: it goes straight to dead (the
// dead-letter queue) whatever attempts remain.
func JobPermanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &idemtype.ControlError{Kind: idemtype.ControlPermanent, Err: err}
}

// JobCancel cancels the job from its handler: no more attempts, state
// cancelled, dependants cancelled.
func JobCancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by handler")
	}
	return &idemtype.ControlError{Kind: idemtype.ControlCancel, Err: err}
}
