package idemtype_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

func TestJobStates(t *testing.T) {
	t.Parallel()
	finished := map[idemtype.JobState]bool{
		idemtype.StatePending: false, idemtype.StateScheduled: false, idemtype.StateAvailable: false,
		idemtype.StateRunning: false, idemtype.StateRetryable: false,
		idemtype.StateCompleted: true, idemtype.StateDead: true, idemtype.StateCancelled: true,
	}
	if len(idemtype.AllStates) != len(finished) {
		t.Fatalf("AllStates has %d states, want %d", len(idemtype.AllStates), len(finished))
	}
	seen := map[idemtype.JobState]bool{}
	for _, s := range idemtype.AllStates {
		want, known := finished[s]
		if !known || seen[s] {
			t.Errorf("AllStates: unexpected or repeated %q", s)
		}
		seen[s] = true
		if !s.Valid() {
			t.Errorf("%q is not Valid", s)
		}
		if s.Finished() != want {
			t.Errorf("%q.Finished() = %v, want %v", s, s.Finished(), want)
		}
	}
	for _, s := range []idemtype.JobState{"", "Completed", "done", "completed "} {
		if s.Valid() || s.Finished() {
			t.Errorf("%q is Valid or Finished", s)
		}
	}
	// The lifecycle order the dashboard and the stats follow.
	if idemtype.AllStates[0] != idemtype.StatePending || idemtype.AllStates[len(idemtype.AllStates)-1] != idemtype.StateCancelled {
		t.Errorf("AllStates out of lifecycle order: %v", idemtype.AllStates)
	}
}

func TestControlError(t *testing.T) {
	t.Parallel()
	cause := errors.New("rate limited")
	for _, tc := range []struct {
		err  *idemtype.ControlError
		text string
	}{
		{&idemtype.ControlError{Kind: idemtype.ControlSnooze, After: time.Minute}, "snooze 1m0s"},
		{&idemtype.ControlError{Kind: idemtype.ControlRetryAfter, After: 30 * time.Second, Err: cause}, "retry after 30s: rate limited"},
		{&idemtype.ControlError{Kind: idemtype.ControlPermanent, Err: cause}, "permanent failure: rate limited"},
		{&idemtype.ControlError{Kind: idemtype.ControlCancel, Err: cause}, "cancelled: rate limited"},
	} {
		if tc.err.Error() != tc.text {
			t.Errorf("kind %d: %q, want %q", tc.err.Kind, tc.err.Error(), tc.text)
		}
		// The executor finds the control flow through any wrapping, and
		// the cause stays reachable.
		wrapped := fmt.Errorf("charge card: %w", tc.err)
		var ce *idemtype.ControlError
		if !errors.As(wrapped, &ce) || ce.Kind != tc.err.Kind || ce.After != tc.err.After {
			t.Errorf("kind %d not found through wrapping", tc.err.Kind)
		}
		if tc.err.Err != nil && !errors.Is(wrapped, cause) {
			t.Errorf("kind %d hides its cause", tc.err.Kind)
		}
	}
	if (&idemtype.ControlError{Kind: idemtype.ControlSnooze}).Unwrap() != nil {
		t.Error("a snooze has a cause")
	}
	if idemtype.ControlSnooze == 0 {
		t.Error("the zero ControlKind must not be a control flow")
	}
}

func TestCodedError(t *testing.T) {
	t.Parallel()
	cause := errors.New("card declined")
	inner := &idemtype.CodedError{Code: "CARD", Err: cause}
	if inner.Error() != "CARD: card declined" || !errors.Is(inner, cause) {
		t.Errorf("coded error %q loses its cause", inner)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"uncoded", cause, ""},
		{"coded", inner, "CARD"},
		{"wrapped", fmt.Errorf("pay: %w", inner), "CARD"},
		{"outermost wins", &idemtype.CodedError{Code: "PAYMENT", Err: fmt.Errorf("step: %w", inner)}, "PAYMENT"},
		{"inside a control flow", &idemtype.ControlError{Kind: idemtype.ControlPermanent, Err: inner}, "CARD"},
		{"joined", errors.Join(cause, inner), "CARD"},
	} {
		if got := idemtype.ErrorCodeOf(tc.err); got != tc.want {
			t.Errorf("%s: ErrorCodeOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSentinelsAreDistinct(t *testing.T) {
	t.Parallel()
	all := []error{idemtype.ErrNotFound, idemtype.ErrKeyReused, idemtype.ErrLeaseLost, idemtype.ErrWrongState,
		idemtype.ErrInvalid, idemtype.ErrKeyInProgress, idemtype.ErrJobTimeout, idemtype.ErrJobCancelled, idemtype.ErrUnavailable, idemtype.ErrClosed}
	texts := map[string]bool{}
	for i, a := range all {
		if texts[a.Error()] {
			t.Errorf("two sentinels read %q", a)
		}
		texts[a.Error()] = true
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v is %v", a, b)
			}
		}
	}
}

func TestKeyReusedError(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("enqueue: %w", &idemtype.KeyReusedError{Key: "order-7", JobID: 42})
	if !errors.Is(err, idemtype.ErrKeyReused) || errors.Is(err, idemtype.ErrInvalid) {
		t.Errorf("%v does not match ErrKeyReused alone", err)
	}
	var kr *idemtype.KeyReusedError
	if !errors.As(err, &kr) || kr.JobID != 42 || kr.Key != "order-7" {
		t.Errorf("data lost: %+v", kr)
	}
	if msg := err.Error(); !strings.Contains(msg, `"order-7"`) || !strings.Contains(msg, "job 42") {
		t.Errorf("message %q names neither the key nor the job", msg)
	}
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	err := idemtype.Invalid("max_attempts", "must be between %d and %d", 1, 100)
	if err.Error() != "invalid max_attempts: must be between 1 and 100" {
		t.Errorf("text %q", err)
	}
	wrapped := fmt.Errorf("enqueue item 3: %w", err)
	var ie *idemtype.InvalidError
	if !errors.Is(wrapped, idemtype.ErrInvalid) || !errors.As(wrapped, &ie) || ie.Field != "max_attempts" {
		t.Errorf("%v: field lost or not ErrInvalid", wrapped)
	}
	// The reason is a format: %% is a literal percent sign.
	if got := idemtype.Invalid("args", "100%% JSON").Error(); got != "invalid args: 100% JSON" {
		t.Errorf("text %q", got)
	}
}
