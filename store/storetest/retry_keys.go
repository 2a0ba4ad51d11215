package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// retryKeyCases: a dead or cancelled job retried (JobRetryMany) is
// unfinished again, so a key with a dedup window of 0 ("only while that
// job is unfinished") blocks the creation of another job again.
func retryKeyCases() []testCase {
	return []testCase{
		{"JobRetryMany/retried_job_blocks_its_key_again_window_0", testRetryKeyWindowZero},
	}
}

// testRetryKeyWindowZero: a job of key K (window 0) dies, or is
// cancelled, at 1 s; retried at 1 h it is unfinished again: an insert of K
// at 2 h answers with it (Existing), and so does one at 49 h after an
// expiry sweep at 48 h (the record is not swept while its job is
// unfinished). Dead again at 50 h, it frees the key: an insert at 51 h
// makes a new job.
func testRetryKeyWindowZero(t *testing.T, s store.Store) {
	for _, end := range []idemtype.JobState{idemtype.StateDead, idemtype.StateCancelled} {
		key := "K-" + string(end)
		p := keyed("k", key, "fp")
		p.DedupWindow, p.Queue = 0, key
		j := insert1(t, s, at(0), p)
		if end == idemtype.StateDead {
			killJob(t, s, j, at(0))
		} else {
			cancelJob(t, s, j, at(time.Second))
		}
		moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{j.ID},
			FromStates: []idemtype.JobState{end}, Now: at(time.Hour)})
		if err != nil || len(moved) != 1 {
			t.Fatalf("%s: retry: %d moved, %v", end, len(moved), err)
		}
		insertAgain := func(now time.Time, what string) {
			t.Helper()
			again := keyed("k", key, "fp")
			again.DedupWindow, again.Queue = 0, key
			res := insertAll(t, s, now, again)[0]
			if res.Err != nil {
				t.Fatalf("%s: insert of the key %s: %v", end, what, res.Err)
			}
			if !res.Existing || res.Job.ID != j.ID {
				t.Errorf("%s: insert of %s %s while its retried job %d is unfinished: job %d existing %v, want job %d existing",
					end, key, what, j.ID, res.Job.ID, res.Existing, j.ID)
			}
		}
		insertAgain(at(2*time.Hour), "after the retry")
		if _, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: at(48 * time.Hour)}); err != nil {
			t.Fatalf("RecordDeleteExpired: %v", err)
		}
		insertAgain(at(49*time.Hour), "after an expiry sweep")
		// Dead again, the job frees its key again.
		killJob(t, s, mustGet(t, s, j.ID), at(50*time.Hour))
		again := keyed("k", key, "fp")
		again.DedupWindow, again.Queue = 0, key
		if res := insertAll(t, s, at(51*time.Hour), again)[0]; res.Err != nil || res.Existing || res.Job.ID == j.ID {
			t.Errorf("%s: insert of %s after its retried job died again: %+v, want a new job", end, key, res)
		}
	}
}
