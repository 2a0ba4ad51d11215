package store

import "github.com/idem-dev/idem/idemtype"

// FinishSeen is what a backend reads of a job whose finish matched no
// running lease, for FinishRepeats to tell a repeat of the finish that
// committed from a finish that lost its lease.
type FinishSeen struct {
	State      idemtype.JobState
	LeaseToken string
	Result     []byte // the job's result (JSON), nil when none
	LastError  string
	ErrorCode  string
	Attempt    int
	// The job's latest attempt row (the highest id): its attempt number
	// (0 when the job has none), outcome and error.
	RowAttempt int
	RowOutcome idemtype.Outcome
	RowError   string
}

// FinishRepeats reports whether finish p, which matched no running lease,
// repeats the finish that committed as the job reads now (seen): a
// client's retry of a finish whose answer was lost.
//
//   - A completion repeats one with the same lease token and the same JSON
//     result (SameResult): the job is completed.
//   - A failure (next state retryable or dead) repeats one with the same
//     lease token, next state, outcome, error and error code: the job
//     is in that state (a retryable one may have been made available
//     since, when due) with that error, and its latest attempt row is
//     the one that failure wrote (its attempt number is the job's, with
//     that outcome and error). A job claimed again has another token; a
//     requeued or retried one reset its attempt, which no row holds.
//
// The backend then accepts p without writing and sets p.Repeated.
func FinishRepeats(p *JobFinishParams, seen *FinishSeen) bool {
	if seen == nil || seen.LeaseToken == "" || seen.LeaseToken != p.LeaseToken {
		return false
	}
	switch p.State {
	case idemtype.StateCompleted:
		return seen.State == idemtype.StateCompleted && SameResult(seen.Result, p.Result)
	case idemtype.StateRetryable, idemtype.StateDead:
		state := seen.State == p.State ||
			(p.State == idemtype.StateRetryable && seen.State == idemtype.StateAvailable)
		return state && seen.LastError == p.Error && seen.ErrorCode == p.ErrorCode &&
			seen.Attempt > 0 && seen.RowAttempt == seen.Attempt && seen.RowOutcome == p.Outcome &&
			seen.RowError == p.Error
	}
	return false
}

// Repeatable reports whether a finish in this next state can be accepted
// as a repeat (FinishRepeats): a completion or a failure.
func Repeatable(state idemtype.JobState) bool {
	return state == idemtype.StateCompleted || state == idemtype.StateRetryable || state == idemtype.StateDead
}
