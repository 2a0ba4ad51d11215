package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testFinishRepeatFailure: a failure repeated with the same lease token,
// next state (retryable or dead), outcome, error and error code — a pull
// worker's retry of a fail whose answer was lost — succeeds without
// writing and is marked Repeated, also once the retryable job was made
// available (it is not claimed again); one repeated with another error,
// error code, state or token, or after the job ran again under a new
// lease, lost its lease. Before, every repeated failure was refused.
func testFinishRepeatFailure(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), newJob("k"), newJob("k"))
	c := claimJob(t, s, js[0], at(0))
	d := claimJob(t, s, js[1], at(0))
	fail := func(state idemtype.JobState, outcome idemtype.Outcome, msg, code string, fin time.Duration) *store.JobFinishParams {
		p := failure(c, state, outcome, msg, at(fin+time.Minute), at(fin))
		p.ErrorCode = code
		return p
	}
	first := fail(idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", "E1", time.Second)
	finish1(t, s, first)
	if first.Repeated {
		t.Error("the first failure is marked Repeated")
	}
	repeat := fail(idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", "E1", 2*time.Second)
	wantOK(t, "repeat with the same token, state and error", finishAll(t, s, repeat)[0])
	if !repeat.Repeated {
		t.Error("a repeated failure is not marked Repeated: callers would count it twice")
	}
	for what, p := range map[string]*store.JobFinishParams{
		"another error":      fail(idemtype.StateRetryable, idemtype.OutcomeFailed, "bang", "E1", 2*time.Second),
		"another error code": fail(idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", "E2", 2*time.Second),
		"another state":      fail(idemtype.StateDead, idemtype.OutcomeDead, "boom", "E1", 2*time.Second),
		"a completion":       completion(c, `1`, at(2*time.Second)),
	} {
		wantErr(t, "repeat with "+what, finishAll(t, s, p)[0], idemtype.ErrLeaseLost)
	}
	other := fail(idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", "E1", 2*time.Second)
	other.LeaseToken = "another-token"
	wantErr(t, "repeat with another token", finishAll(t, s, other)[0], idemtype.ErrLeaseLost)
	got := wantState(t, s, c.ID, idemtype.StateRetryable)
	wantTime(t, "RunAt (the first failure's)", got.RunAt, at(time.Minute+time.Second))
	if got.LastError != "boom" || got.ErrorCode != "E1" || got.Attempt != 1 {
		t.Errorf("after repeats: last error %q code %q attempt %d", got.LastError, got.ErrorCode, got.Attempt)
	}
	if as := attempts(t, s, c.ID); len(as) != 1 {
		t.Errorf("attempts after repeats: %s, want the first failure's only", fmtAttempts(as))
	}

	// Made available when due (not claimed): still the same attempt.
	if _, err := s.JobPromote(t.Context(), &store.JobPromoteParams{Now: at(2 * time.Minute)}); err != nil {
		t.Fatalf("JobPromote: %v", err)
	}
	wantState(t, s, c.ID, idemtype.StateAvailable)
	wantOK(t, "repeat once the job is available again",
		finishAll(t, s, fail(idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", "E1", 3*time.Second))[0])
	wantState(t, s, c.ID, idemtype.StateAvailable)

	// Claimed again (a new lease) and failed alike: the first lease's
	// repeat is refused.
	again := claimJob(t, s, js[0], at(3*time.Minute))
	finish1(t, s, failure(again, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(time.Hour), at(3*time.Minute+time.Second)))
	wantErr(t, "repeat after a new lease", finishAll(t, s,
		fail(idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", "E1", 4*time.Second))[0], idemtype.ErrLeaseLost)

	// A dead end repeated is accepted too, and not after a requeue.
	dead := failure(d, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(time.Second))
	finish1(t, s, dead)
	deadAgain := failure(d, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(2*time.Second))
	wantOK(t, "repeat of a dead end", finishAll(t, s, deadAgain)[0])
	if !deadAgain.Repeated {
		t.Error("a repeated dead end is not marked Repeated")
	}
	if as := attempts(t, s, d.ID); len(as) != 1 {
		t.Errorf("attempts after a repeated dead end: %s", fmtAttempts(as))
	}
	if _, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{d.ID}, FromStates: []idemtype.JobState{idemtype.StateDead},
		Now: at(time.Minute)}); err != nil {
		t.Fatalf("JobRetryMany: %v", err)
	}
	wantErr(t, "repeat of a dead end after a requeue", finishAll(t, s,
		failure(d, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(2*time.Minute)))[0], idemtype.ErrLeaseLost)
}
