package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// seedCases are the behaviours the five seed systems rely on: the record of
// a dead or cancelled job reads failed, stats count records by status.
func seedCases() []testCase {
	return []testCase{
		{"Records/dead_or_cancelled_job_reads_failed", testRecordFailedStatus},
		{"RecordStats/counts_by_status", testRecordStatsByStatus},
	}
}

func testRecordFailedStatus(t *testing.T, s store.Store) {
	dead := killJob(t, s, insert1(t, s, at(0), keyed("k", "dead", "fp1")), at(0))
	cancelled := cancelJob(t, s, insert1(t, s, at(0), keyed("k", "cancelled", "fp2")), at(0))
	if got := record(t, s, "default", "dead", at(2*time.Second)); got.Status != idemtype.RecordFailed || got.JobID != dead.ID {
		t.Errorf("record of a dead job: status %q job %d, want failed job %d", got.Status, got.JobID, dead.ID)
	}
	if got := record(t, s, "", "cancelled", at(2*time.Second)); got.Status != idemtype.RecordFailed || got.JobID != cancelled.ID {
		t.Errorf("record of a cancelled job: status %q job %d, want failed", got.Status, got.JobID)
	}
	// Requeued, the job is live again and so is its record.
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{dead.ID},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(3 * time.Second)})
	wantOK(t, "JobRetryMany", err)
	if len(moved) != 1 {
		t.Fatalf("JobRetryMany moved %d jobs, want 1", len(moved))
	}
	if got := record(t, s, "default", "dead", at(4*time.Second)); got.Status != idemtype.RecordInProgress {
		t.Errorf("record of a requeued job: status %q, want in_progress", got.Status)
	}
}

func testRecordStatsByStatus(t *testing.T, s store.Store) {
	completeJob(t, s, insert1(t, s, at(0), keyed("k", "done", "fp1")), at(0), `{"ok":true}`)
	killJob(t, s, insert1(t, s, at(0), keyed("k", "dead", "fp2")), at(0))
	insert1(t, s, at(0), keyed("k", "waiting", "fp3"))
	st, err := s.RecordStats(t.Context(), &store.RecordStatsParams{Now: at(5 * time.Second)})
	wantOK(t, "RecordStats", err)
	if st.Entries != 3 || st.Completed != 1 || st.Failed != 1 || st.InProgress != 1 {
		t.Errorf("stats: entries %d completed %d failed %d in progress %d, want 3 1 1 1",
			st.Entries, st.Completed, st.Failed, st.InProgress)
	}
}
