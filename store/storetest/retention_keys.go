package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// retentionKeyCases: retention (JobDeleteFinished) of keyed jobs against
// their records.
func retentionKeyCases() []testCase {
	return []testCase{
		{"JobDeleteFinished/window_ended_deletes_the_job_and_keeps_its_cached_result", testRetentionKeepsResult},
	}
}

// testRetentionKeepsResult: a completed keyed job (window 1 h, result TTL
// 1 h, finished at 1 s: its result lives until 1 h 1 s) is deleted by
// retention once its window has ended, as a job without a key is — the
// contract keeps only a job whose record's window is open — and its
// record serves the cached result until the result's own expiry, to
// RecordGet and to a later job of the key. PostgreSQL kept the job until
// its result expired (up to an hour past the window): such a completion
// is read from the job row (pgstore's derivedJoin), and retention passed
// over the job rather than write the completion into the record, as a DLQ
// delete does.
func testRetentionKeepsResult(t *testing.T, s store.Store) {
	p := keyedTTL("kr", "KR", time.Hour, time.Hour)
	j := completeJob(t, s, insert1(t, s, at(0), p), at(0), `"R"`)
	now := at(time.Hour + 500*time.Millisecond)
	if n := deleteFinished(t, s, &store.JobDeleteFinishedParams{CompletedBefore: at(time.Hour), Limit: 100, Now: now}); n != 1 {
		t.Errorf("retention after the window deleted %d jobs, want 1", n)
	}
	if _, err := s.JobGet(t.Context(), &store.JobGetParams{ID: j.ID}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("job %d after retention: %v, want ErrNotFound", j.ID, err)
	}
	r := record(t, s, "default", "KR", now)
	if r.Status != idemtype.RecordCompleted || string(r.Result) != `"R"` || r.ResultJobID != j.ID {
		t.Errorf("record after retention: %s %s (result job %d), want the cached result of job %d",
			r.Status, r.Result, r.ResultJobID, j.ID)
	}
	wantTimeP(t, "ResultExpiresAt after retention", r.ResultExpiresAt, at(time.Hour+time.Second))
	if _, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: now, Limit: 10}); err != nil {
		t.Fatalf("RecordDeleteExpired: %v", err)
	}
	j2 := insertNew(t, s, now, keyedTTL("kr", "KR", time.Hour, time.Hour))[0]
	wantServed(t, s, "job of the key after retention", j2, now, true)
}
