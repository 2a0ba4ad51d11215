package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// retryDepCases: a job whose dependency was deleted is retried only if it
// started once (JobRetryMany, store.RetryRefusal); jobs retried together
// are reopened dependencies first.
func retryDepCases() []testCase {
	return []testCase{
		{"JobRetryMany/never_started_with_deleted_dependency_is_refused", testRetryRefusedDeletedDep},
		{"JobRetryMany/by_filter_skips_never_started_with_deleted_dependency", testRetryFilterSkipsDeletedDep},
		{"JobRetryMany/started_job_with_deleted_dependency_is_retried", testRetryStartedDeletedDep},
		{"JobRetryMany/dependency_and_dependants_retried_together", testRetryDepsTogether},
	}
}

// deleteJob deletes job id, which is in state.
func deleteJob(t *testing.T, s store.Store, id int64, state idemtype.JobState) {
	t.Helper()
	if err := s.JobDelete(t.Context(), &store.JobDeleteParams{ID: id, State: state}); err != nil {
		t.Fatalf("JobDelete(%d, %s): %v", id, state, err)
	}
}

// cancelledByDeletedDep inserts a job depending on a new job that ends
// dead (or cancelled), which cancels the dependant before it ever ran,
// then deletes the dependency. It returns the dependant and the
// dependency's id.
func cancelledByDeletedDep(t *testing.T, s store.Store, how idemtype.JobState, kind string) (*idemtype.JobRow, int64) {
	t.Helper()
	d := insert1(t, s, at(0), newJob(kind+"-dep"))
	pc := newJob(kind)
	pc.DependsOn = []int64{d.ID}
	c := insert1(t, s, at(0), pc)
	if how == idemtype.StateDead {
		killJob(t, s, d, at(time.Second))
	} else {
		cancelJob(t, s, d, at(time.Second))
	}
	c = wantState(t, s, c.ID, idemtype.StateCancelled)
	if c.Attempt != 0 {
		t.Fatalf("dependant attempt %d, want 0", c.Attempt)
	}
	deleteJob(t, s, d.ID, how)
	return c, d.ID
}

// testRetryRefusedDeletedDep: a dependant cancelled because its dependency
// died (or was cancelled) never ran; once that dependency is deleted, a
// retry by ids is refused with ErrInvalid naming the job and the
// dependency, and neither it nor the other ids of the call move.
func testRetryRefusedDeletedDep(t *testing.T, s store.Store) {
	for _, how := range []idemtype.JobState{idemtype.StateDead, idemtype.StateCancelled} {
		t.Run(string(how), func(t *testing.T) {
			c, dep := cancelledByDeletedDep(t, s, how, "c-"+string(how))
			other := killJob(t, s, insert1(t, s, at(0), newJob("other-"+string(how))), at(2*time.Second))

			rows, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{
				IDs: []int64{c.ID, other.ID}, Now: at(3 * time.Second)})
			if !errors.Is(err, idemtype.ErrInvalid) {
				t.Fatalf("JobRetryMany: moved %v, error %v; want ErrInvalid", sortedIDs(rows), err)
			}
			var refused *store.RetryRefusedError
			if !errors.As(err, &refused) || len(refused.Refused) != 1 ||
				refused.Refused[0].ID != c.ID || refused.Refused[0].Dependency != dep {
				t.Errorf("JobRetryMany error %v: want one refusal of job %d for dependency %d", err, c.ID, dep)
			}
			want := fmt.Sprintf("job %d: dependency %d no longer exists", c.ID, dep)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("JobRetryMany error %q does not say %q", err, want)
			}
			if len(rows) != 0 {
				t.Errorf("JobRetryMany moved %v with the error", sortedIDs(rows))
			}
			got := wantState(t, s, c.ID, idemtype.StateCancelled)
			if got.FinishedAt == nil || !got.FinishedAt.Equal(*c.FinishedAt) || got.LastError != c.LastError {
				t.Errorf("refused job changed: finished_at %v last_error %q, was %v %q",
					got.FinishedAt, got.LastError, c.FinishedAt, c.LastError)
			}
			wantState(t, s, other.ID, idemtype.StateDead)
			wantIDs(t, "claim after the refused retry", ids(claim(t, s, at(4*time.Second), 10)), nil)

			// Without the refused job, the other one is retried.
			retryIDs(t, s, at(5*time.Second), other.ID)
			wantState(t, s, c.ID, idemtype.StateCancelled)
		})
	}
}

// testRetryFilterSkipsDeletedDep: a retry by filter leaves a never-started
// dependant of a deleted job where it is, without error, and it does not
// take up the Limit: the next job is retried.
func testRetryFilterSkipsDeletedDep(t *testing.T, s store.Store) {
	c, _ := cancelledByDeletedDep(t, s, idemtype.StateDead, "c")
	other := cancelJob(t, s, insert1(t, s, at(0), newJob("other")), at(2*time.Second))
	if other.ID < c.ID {
		t.Fatalf("other job %d before the dependant %d", other.ID, c.ID)
	}
	rows, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{
		Filter: store.JobFilter{Tenant: "default"}, FromStates: []idemtype.JobState{idemtype.StateCancelled},
		Limit: 1, Now: at(3 * time.Second)})
	if err != nil {
		t.Fatalf("JobRetryMany by filter: %v", err)
	}
	wantIDs(t, "retried by filter", sortedIDs(rows), []int64{other.ID})
	wantState(t, s, c.ID, idemtype.StateCancelled)
	wantState(t, s, other.ID, idemtype.StateAvailable)
}

// testRetryStartedDeletedDep: a job that ran (its dependency had
// completed) and died is retried after that dependency was deleted, and
// so is it when it was retried and cancelled again before it ran (its
// stored attempts show it started). A job waiting for any outcome
// (DependsOnFinished) had what it waited for: a deleted job had finished.
func testRetryStartedDeletedDep(t *testing.T, s store.Store) {
	d := insert1(t, s, at(0), newJob("dep"))
	pc := newJob("c")
	pc.DependsOn = []int64{d.ID}
	c := insert1(t, s, at(0), pc)
	completeJob(t, s, d, at(time.Second), `1`)
	wantState(t, s, c.ID, idemtype.StateAvailable)
	killJob(t, s, c, at(3*time.Second))
	deleteJob(t, s, d.ID, idemtype.StateCompleted)

	rows := retryIDs(t, s, at(5*time.Second), c.ID)
	if rows[0].State != idemtype.StateAvailable || rows[0].Attempt != 0 {
		t.Errorf("retried job: state %s attempt %d, want available and 0", rows[0].State, rows[0].Attempt)
	}
	cancelJob(t, s, rows[0], at(6*time.Second))
	rows = retryIDs(t, s, at(7*time.Second), c.ID)
	if rows[0].State != idemtype.StateAvailable {
		t.Errorf("job retried again: state %s, want available", rows[0].State)
	}

	da := insert1(t, s, at(0), newJob("dep-any"))
	pa := newJob("any")
	pa.DependsOn, pa.DependsOnFinished = []int64{da.ID}, true
	a := insert1(t, s, at(0), pa)
	cancelJob(t, s, a, at(8*time.Second))
	killJob(t, s, da, at(9*time.Second))
	deleteJob(t, s, da.ID, idemtype.StateDead)
	rows = retryIDs(t, s, at(11*time.Second), a.ID)
	if rows[0].State != idemtype.StateAvailable {
		t.Errorf("retried any-outcome dependant: state %s, want available", rows[0].State)
	}
}

// testRetryDepsTogether: a job that died took its dependants (a chain)
// with it; retrying all of them in one call gives each the state an insert
// would give it once the jobs before it are retried: the dependency
// available, its dependants pending on it — not cancelled again by the
// state their dependency had before the call.
func testRetryDepsTogether(t *testing.T, s store.Store) {
	head := insert1(t, s, at(0), newJob("head"))
	mid := newJob("mid")
	mid.DependsOn = []int64{head.ID}
	m := insert1(t, s, at(0), mid)
	tail := newJob("tail")
	tail.DependsOn = []int64{m.ID}
	tl := insert1(t, s, at(0), tail)
	killJob(t, s, head, at(time.Second))
	wantState(t, s, m.ID, idemtype.StateCancelled)
	wantState(t, s, tl.ID, idemtype.StateCancelled)

	now := at(3 * time.Second)
	rows := retryIDs(t, s, now, head.ID, m.ID, tl.ID)
	got := map[int64]idemtype.JobState{}
	for _, r := range rows {
		got[r.ID] = r.State
	}
	want := map[int64]idemtype.JobState{head.ID: idemtype.StateAvailable,
		m.ID: idemtype.StatePending, tl.ID: idemtype.StatePending}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("retried job %d: returned state %s, want %s", id, got[id], st)
		}
		wantState(t, s, id, st)
	}
	// The chain then runs in order.
	completeJob(t, s, mustGet(t, s, head.ID), at(4*time.Second), `1`)
	wantState(t, s, m.ID, idemtype.StateAvailable)
	wantState(t, s, tl.ID, idemtype.StatePending)

	// A job waiting for any outcome (a batch's completion job) ran after
	// its dependency died and died too; requeued together from the DLQ,
	// it waits for the dependency's new end instead of running beside it.
	dep := insert1(t, s, at(0), newJob("child"))
	report := newJob("report")
	report.DependsOn, report.DependsOnFinished = []int64{dep.ID}, true
	rp := insert1(t, s, at(0), report)
	killJob(t, s, dep, at(5*time.Second))
	killJob(t, s, mustGet(t, s, rp.ID), at(7*time.Second))
	rows, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{dep.ID, rp.ID},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(9 * time.Second)})
	if err != nil || len(rows) != 2 {
		t.Fatalf("requeue: %d rows, %v", len(rows), err)
	}
	wantState(t, s, dep.ID, idemtype.StateAvailable)
	wantState(t, s, rp.ID, idemtype.StatePending)
}
