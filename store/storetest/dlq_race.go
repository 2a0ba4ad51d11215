package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// dlqCases are the dead-letter queue's operations against each other and
// the batch completion job they affect.
func dlqCases() []testCase {
	return []testCase{
		{"Race/dlq_delete_against_requeue_keeps_the_attempts", testRaceDLQDeleteRequeue},
		{"BatchCreate/on_finish_child_deleted_from_the_dlq_counts_as_finished", testOnFinishChildDeleted},
		{"BatchCreate/on_finish_waits_for_a_requeued_child", testOnFinishChildRequeued},
	}
}

// requeue retries the dead or cancelled jobs ids at now.
func requeue(t *testing.T, s store.Store, now time.Time, ids ...int64) []*idemtype.JobRow {
	t.Helper()
	rows, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: ids,
		FromStates: []idemtype.JobState{idemtype.StateDead, idemtype.StateCancelled}, Now: now})
	if err != nil {
		t.Fatalf("JobRetryMany(%v): %v", ids, err)
	}
	return rows
}

// testRaceDLQDeleteRequeue: a DLQ delete and a requeue of one dead job at
// once. One of them wins: the job is deleted with its attempts, or it is
// requeued with them. On PostgreSQL the delete removed the attempts by its
// statement's snapshot while it waited for the job's row, which the
// requeue held; the requeue committed, the job was no longer dead and
// stayed, without its history (and, with attempt 0 and no attempt row,
// looked never started to the retry's refusal of a missing dependency).
func testRaceDLQDeleteRequeue(t *testing.T, s store.Store) {
	var lost []string
	for round := range 40 {
		j := insert1(t, s, at(0), newJob(fmt.Sprintf("dlq%d", round)))
		killJob(t, s, j, at(time.Second))
		var wg sync.WaitGroup
		var delErr, retErr error
		var moved []*idemtype.JobRow
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			delErr = s.JobDelete(t.Context(), &store.JobDeleteParams{Tenant: "default", ID: j.ID, State: idemtype.StateDead})
		}()
		go func() {
			defer wg.Done()
			<-start
			moved, retErr = s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{j.ID},
				FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(2 * time.Second)})
		}()
		close(start)
		wg.Wait()
		if retErr != nil {
			t.Fatalf("round %d: JobRetryMany: %v", round, retErr)
		}
		switch {
		case delErr == nil && len(moved) > 0:
			t.Fatalf("round %d: job %d both deleted and requeued", round, j.ID)
		case delErr != nil && len(moved) == 0:
			t.Fatalf("round %d: job %d neither deleted nor requeued: %v", round, j.ID, delErr)
		case delErr != nil:
			wantErr(t, fmt.Sprintf("round %d: JobDelete of a requeued job", round), delErr, idemtype.ErrNotFound)
			if as := attempts(t, s, j.ID); len(as) != 1 {
				lost = append(lost, fmt.Sprintf("round %d: requeued job %d has %d attempts, want 1", round, j.ID, len(as)))
			}
		default:
			if _, err := s.JobGet(t.Context(), &store.JobGetParams{ID: j.ID}); err == nil {
				t.Fatalf("round %d: job %d deleted, still there", round, j.ID)
			}
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of 40 requeues lost the attempts a racing delete did not delete the job of: %v", len(lost), lost)
	}
}

// testOnFinishChildDeleted: a dead child deleted from the DLQ before the
// other children finish counts as finished: the completion job is
// released by the last child's finish, not left pending.
func testOnFinishChildDeleted(t *testing.T, s store.Store) {
	r := batchWithOnFinish(t, s, "DEL", 3, at(0))
	killJob(t, s, r.Jobs[0].Job, at(time.Second))
	if err := s.JobDelete(t.Context(), &store.JobDeleteParams{Tenant: "default", ID: r.Jobs[0].Job.ID,
		State: idemtype.StateDead}); err != nil {
		t.Fatalf("JobDelete: %v", err)
	}
	completeJob(t, s, r.Jobs[1].Job, at(3*time.Second), `1`)
	wantState(t, s, r.OnFinish, idemtype.StatePending)
	completeJob(t, s, r.Jobs[2].Job, at(5*time.Second), `1`)
	wantState(t, s, r.OnFinish, idemtype.StateAvailable)
}

// testOnFinishChildRequeued: a dead child requeued while the completion
// job waits is unfinished again: the other children's finishes leave the
// completion job pending, and the requeued child's finish releases it.
func testOnFinishChildRequeued(t *testing.T, s store.Store) {
	r := batchWithOnFinish(t, s, "REQ", 3, at(0))
	killJob(t, s, r.Jobs[0].Job, at(time.Second))
	requeue(t, s, at(2*time.Second), r.Jobs[0].Job.ID)
	completeJob(t, s, r.Jobs[1].Job, at(3*time.Second), `1`)
	completeJob(t, s, r.Jobs[2].Job, at(5*time.Second), `1`)
	wantState(t, s, r.OnFinish, idemtype.StatePending)
	completeJob(t, s, r.Jobs[0].Job, at(7*time.Second), `1`)
	wantState(t, s, r.OnFinish, idemtype.StateAvailable)
}
