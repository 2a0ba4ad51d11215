package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// recordKeptTTLCases: a cached result that a later job of its key keeps
// (the job's insert reopens the record after its window, or a window-0
// job of the key finishes without storing a result) lives until its own
// expiry, the completion plus the TTL of the job that stored it, whatever
// the later job's result TTL.
func recordKeptTTLCases() []testCase {
	return []testCase{
		{"Records/reopen_keeps_the_results_own_expiry_whatever_the_new_jobs_ttl", testReopenKeepsResultExpiry},
		{"Records/window_0_close_keeps_the_results_own_expiry", testWindowZeroCloseKeepsResultExpiry},
	}
}

// keyedTTL is keyed with dedup window window and result TTL ttl.
func keyedTTL(kind, key string, window, ttl time.Duration) *store.JobInsertParams {
	p := keyed(kind, key, "fp")
	p.DedupWindow, p.ResultTTL = window, ttl
	return p
}

// wantServed acquires the key of job j's claim at now, as its attempt
// does, and fails t unless the result `"R"` is served (cached) or not
// (the key is acquired: the job runs).
func wantServed(t *testing.T, s store.Store, what string, j *idemtype.JobRow, now time.Time, cached bool) {
	t.Helper()
	c := claimJob(t, s, j, now)
	got, err := jobAcquire(t.Context(), s, c, now)
	if err != nil {
		t.Fatalf("%s: acquire: %v", what, err)
	}
	switch {
	case cached && (got.Acquired || string(got.Record.Result) != `"R"`):
		t.Errorf("%s: at %v the key was acquired (result %s): a live cached result was not served",
			what, now, got.Record.Result)
	case !cached && !got.Acquired:
		t.Errorf("%s: at %v the result %s was served past its expiry", what, now, got.Record.Result)
	}
}

// testReopenKeepsResultExpiry: job 1 of a key stores "R" at 1 s with its
// TTL; job 2 of the key, made after the window with another TTL, reopens
// the record and keeps the result. The result is served to job 2 until
// its own expiry, not until the expiry job 2's TTL would give it: the
// reopen rebased it on that TTL, so a shorter one dropped a live result
// (job 2 ran its handler again) and a longer one served a result past its
// expiry. The last case is PostgreSQL's completion read from the job row
// (window 1 h, TTL 1 h: pgstore's derivedJoin), which the reopen writes
// into the record.
func testReopenKeepsResultExpiry(t *testing.T, s store.Store) {
	for _, c := range []struct {
		key              string
		window, ttl1     time.Duration
		reopenAt, ttl2   time.Duration
		claimAt          time.Duration
		cached           bool
		resultExpiresAt  time.Duration // after the reopen; 0 = no result
		recordExpiresMin time.Duration
	}{
		{"SHORTER", time.Hour, 24 * time.Hour, 2 * time.Hour, time.Hour, 3 * time.Hour, true,
			24*time.Hour + time.Second, 24*time.Hour + time.Second},
		{"LONGER", time.Hour, 2 * time.Hour, 90 * time.Minute, 7 * 24 * time.Hour, 3 * time.Hour, false,
			2*time.Hour + time.Second, 2*time.Hour + time.Second},
		{"ZERO_SHORTER", 0, 24 * time.Hour, 2 * time.Hour, time.Hour, 3 * time.Hour, true,
			24*time.Hour + time.Second, 0},
		{"ZERO_LONGER", 0, 2 * time.Hour, 90 * time.Minute, 7 * 24 * time.Hour, 3 * time.Hour, false,
			2*time.Hour + time.Second, 0},
		{"DERIVED", time.Hour, time.Hour, time.Hour, time.Minute, time.Hour + 500*time.Millisecond, true,
			time.Hour + time.Second, time.Hour + time.Second},
	} {
		j1 := insert1(t, s, at(0), keyedTTL("k1"+c.key, c.key, c.window, c.ttl1))
		completeJob(t, s, j1, at(0), `"R"`) // finished at 1 s
		res := insertAll(t, s, at(c.reopenAt), keyedTTL("k2"+c.key, c.key, c.window, c.ttl2))[0]
		if res.Err != nil || res.Existing {
			t.Fatalf("%s: job of the key after its window: %+v, want a new job", c.key, res)
		}
		r := record(t, s, "default", c.key, at(c.reopenAt))
		if r.Status != idemtype.RecordCompleted || string(r.Result) != `"R"` {
			t.Errorf("%s: reopened record %s %s, want the cached result", c.key, r.Status, r.Result)
		}
		wantTimeP(t, c.key+": ResultExpiresAt after the reopen", r.ResultExpiresAt, at(c.resultExpiresAt))
		if c.recordExpiresMin > 0 && r.ExpiresAt.Before(at(c.recordExpiresMin)) {
			t.Errorf("%s: record expires at %v, before its result (%v)", c.key, r.ExpiresAt, at(c.recordExpiresMin))
		}
		wantServed(t, s, c.key, res.Job, at(c.claimAt), c.cached)
	}
}

// testWindowZeroCloseKeepsResultExpiry: job 1 (window 0, TTL 24 h) stores
// "R"; job 2 of the key (window 0, TTL 1 h), made after job 1 finished,
// keeps the result, and finishes without storing one — cancelled,
// completed from the cache, or dead. The close of its window must keep
// the record until the result's own expiry: it gave the record job 2's
// TTL from the result's completion, so the expiry sweep deleted the
// record with its live result and job 3 of the key ran again.
func testWindowZeroCloseKeepsResultExpiry(t *testing.T, s store.Store) {
	for _, how := range []string{"CANCEL", "CACHED", "DEAD"} {
		j1 := insert1(t, s, at(0), keyedTTL("k1"+how, how, 0, 24*time.Hour))
		completeJob(t, s, j1, at(0), `"R"`) // finished at 1 s: the result lives until 24 h + 1 s
		j2 := insertNew(t, s, at(2*time.Hour), keyedTTL("k2"+how, how, 0, time.Hour))[0]
		end := at(2*time.Hour + time.Minute)
		switch how {
		case "CANCEL":
			cancelJob(t, s, j2, end)
		case "CACHED":
			c := claimJob(t, s, j2, end)
			p := completion(c, `"R"`, end)
			p.WasCached, p.OriginalJobID, p.Outcome = true, j1.ID, idemtype.OutcomeCached
			finish1(t, s, p)
		case "DEAD":
			c := claimJob(t, s, j2, end)
			finish1(t, s, failure(c, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, end))
		}
		r := record(t, s, "default", how, end)
		wantTimeP(t, how+": ExpiresAt after job 2 finished", r.ExpiresAt, at(24*time.Hour+time.Second))
		if _, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: at(3 * time.Hour), Limit: 10}); err != nil {
			t.Fatalf("RecordDeleteExpired: %v", err)
		}
		j3 := insertNew(t, s, at(3*time.Hour), keyedTTL("k3"+how, how, 0, time.Hour))[0]
		wantServed(t, s, how+": job 3", j3, at(3*time.Hour), true)
	}
}
