package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// A result TTL shorter than the dedup window (PRODUCT.md, "Exactly-once
// execution": the result TTL is separate from the dedup window): the record
// stays until the window ends, so a repeat of the key still gets its job,
// but its cached result expires at the finish plus the TTL — it is no
// longer served, the expiry sweep drops its bytes, and the views and
// statistics say so.
func recordTTLCases() []testCase {
	return []testCase{
		{"Records/result_ttl_shorter_than_the_window_expires_the_result_not_the_key", testResultTTLShorterThanWindow},
		{"Records/expired_result_is_not_served_to_a_later_job_of_the_key", testExpiredResultNotServed},
		{"RecordLease/lease_outlives_a_shorter_ttl", testLeaseOutlivesTTL},
	}
}

// shortTTL returns keyed params with a two-day window and a result TTL of
// one hour.
func shortTTL(kind, key string) *store.JobInsertParams {
	p := keyed(kind, key, "fp")
	p.DedupWindow, p.ResultTTL = 48*time.Hour, time.Hour
	return p
}

// recordStats runs RecordStats for the default tenant at now.
func recordStats(t *testing.T, s store.Store, now time.Time) *store.RecordStats {
	t.Helper()
	st, err := s.RecordStats(t.Context(), &store.RecordStatsParams{Tenant: "default", Now: now})
	if err != nil {
		t.Fatalf("RecordStats: %v", err)
	}
	return st
}

// testResultTTLShorterThanWindow: job K (window 2 days, result TTL 1 h)
// completes at 1m1s, and a lease record D (a Do key kept for 2 days)
// stores a result for 1 h. Within the hour both serve their results. After
// it, a repeat of K still gets its job, but the records hold no live result:
// reads show none (ResultExpiresAt says when it expired), the statistics
// count them expired and their bytes out of the cache size, another owner
// takes D's lease, and the sweep drops K's bytes while keeping its record.
func testResultTTLShorterThanWindow(t *testing.T, s store.Store) {
	ctx := t.Context()
	j := insert1(t, s, at(0), shortTTL("k", "K"))
	completeJob(t, s, j, at(time.Minute), `"R"`)
	fin := at(time.Minute + time.Second)
	d := acq("D", "do:a", at(0))
	d.DedupUntil, d.ExpiresAt = at(48*time.Hour), at(48*time.Hour)
	if !acquire(t, s, d).Acquired {
		t.Fatalf("could not take D's lease")
	}
	if err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "default", Key: "D", Owner: "do:a",
		Result: []byte(`"D"`), ResultHash: hash(`"D"`), TTL: time.Hour, DurationMS: 3, Now: fin}); err != nil {
		t.Fatalf("RecordComplete(D): %v", err)
	}

	live := at(30 * time.Minute)
	for k, res := range map[string]string{"K": `"R"`, "D": `"D"`} {
		r := record(t, s, "default", k, live)
		if r.Status != idemtype.RecordCompleted || string(r.Result) != res {
			t.Errorf("%s within its result TTL: status %s result %s, want completed %s", k, r.Status, r.Result, res)
		}
		wantTimeP(t, k+": ResultExpiresAt", r.ResultExpiresAt, fin.Add(time.Hour))
		wantTimeP(t, k+": ExpiresAt (the window's end)", r.ExpiresAt, at(48*time.Hour))
	}
	if st := recordStats(t, s, live); st.Entries != 2 || st.Completed != 2 || st.SizeBytes != 6 || st.Expired != 0 || st.Expiring24h != 2 {
		t.Errorf("RecordStats within the result TTL: %+v, want 2 entries, 2 completed, 6 bytes, 2 expiring in 24h, none expired", st)
	}
	if got := acquire(t, s, acq("D", "do:b", live)); got.Acquired || string(got.Record.Result) != `"D"` {
		t.Errorf("D within its result TTL: acquired %v result %s, want its cached result", got.Acquired, got.Record.Result)
	}

	now := at(2 * time.Hour) // both results expired; the windows are open
	if res := insertAll(t, s, now, shortTTL("k", "K"))[0]; res.Err != nil || !res.Existing || res.Job.ID != j.ID {
		t.Errorf("repeat of K within its window after its result expired: %+v, want job %d (existing)", res, j.ID)
	}
	for _, k := range []string{"K", "D"} {
		r := record(t, s, "default", k, now)
		if r.Status != idemtype.RecordCompleted || r.Result != nil || r.SizeBytes != 0 {
			t.Errorf("%s after its result TTL: status %s result %s size %d, want completed without a result", k, r.Status, r.Result, r.SizeBytes)
		}
		wantTimeP(t, k+": ResultExpiresAt after it", r.ResultExpiresAt, fin.Add(time.Hour))
		wantTimeP(t, k+": ExpiresAt after the result's", r.ExpiresAt, at(48*time.Hour))
	}
	if st := recordStats(t, s, now); st.Entries != 2 || st.Completed != 0 || st.SizeBytes != 0 || st.Expired != 2 || st.Expiring24h != 0 {
		t.Errorf("RecordStats after the result TTL: %+v, want 2 entries, none completed, 0 bytes, 2 expired (awaiting the sweep), none expiring in 24h", st)
	}
	if got := acquire(t, s, acq("D", "do:b", now)); !got.Acquired {
		t.Errorf("D after its result TTL: not acquired (%s, result %s): an expired result was served", got.Record.Status, got.Record.Result)
	}
	if _, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: now, Limit: 100}); err != nil {
		t.Fatalf("RecordDeleteExpired: %v", err)
	}
	if st := recordStats(t, s, now); st.Entries != 2 || st.Expired != 0 || st.SizeBytes != 0 {
		t.Errorf("RecordStats after the sweep: %+v, want 2 entries (the windows are open), none expired, 0 bytes", st)
	}
	r := record(t, s, "default", "K", now)
	if r.JobID != j.ID || r.Result != nil || r.ResultJobID != j.ID {
		t.Errorf("K after the sweep: job %d result %s result job %d, want job %d, no result", r.JobID, r.Result, r.ResultJobID, j.ID)
	}
	if res := insertAll(t, s, now, shortTTL("k", "K"))[0]; res.Err != nil || !res.Existing || res.Job.ID != j.ID {
		t.Errorf("repeat of K after the sweep: %+v, want job %d (existing)", res, j.ID)
	}
}

// testExpiredResultNotServed: the jobs of keys A and B (window 2 days,
// result TTL 1 h) complete and are deleted (JobDelete) in their windows; a
// new job of each key is created. A's, created within the hour, completes
// from the cache; B's, created after it, runs: its acquire takes the key.
func testExpiredResultNotServed(t *testing.T, s store.Store) {
	for _, c := range []struct {
		key    string
		now    time.Time
		cached bool
	}{{"A", at(30 * time.Minute), true}, {"B", at(2 * time.Hour), false}} {
		j := insert1(t, s, at(0), shortTTL("k-"+c.key, c.key))
		completeJob(t, s, j, at(time.Minute), `"R"`)
		if err := s.JobDelete(t.Context(), &store.JobDeleteParams{Tenant: "default", ID: j.ID, State: idemtype.StateCompleted}); err != nil {
			t.Fatalf("JobDelete(%d): %v", j.ID, err)
		}
		res := insertAll(t, s, c.now, shortTTL("k-"+c.key, c.key))[0]
		if res.Err != nil || res.Existing {
			t.Fatalf("%s: insert after its job was deleted: %+v, want a new job", c.key, res)
		}
		cl := claimJob(t, s, res.Job, c.now)
		got, err := jobAcquire(t.Context(), s, cl, c.now)
		if err != nil {
			t.Fatalf("%s: acquire: %v", c.key, err)
		}
		switch {
		case c.cached && (got.Acquired || string(got.Record.Result) != `"R"`):
			t.Errorf("%s within the result TTL: acquired %v, want the cached result", c.key, got.Acquired)
		case !c.cached && !got.Acquired:
			t.Errorf("%s after the result TTL: not acquired (record %s, result %s): the expired result was served",
				c.key, got.Record.Status, got.Record.Result)
		}
	}
}

// CheckCompletedBeforeResultExpiry fails t unless the record of key (tenant
// "default") reads completed at now with result want and a result expiry
// of expires: what a record completed before migration 0023 reads as
// afterwards (its result expires with the record). Both stores' migration
// tests use it.
func CheckCompletedBeforeResultExpiry(t *testing.T, s store.Store, key string, now time.Time, want string, expires time.Time) {
	t.Helper()
	r, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: key, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != idemtype.RecordCompleted || string(r.Result) != want || r.ResultExpiresAt == nil ||
		!r.ResultExpiresAt.Equal(expires) {
		t.Errorf("completed record after the migration: %s %s, result expires %v; want its result until %v",
			r.Status, r.Result, r.ResultExpiresAt, expires)
	}
}

// testLeaseOutlivesTTL: a lease without a job whose record would expire
// before the lease ends (a result TTL of 1 m for work leased 10 m) keeps
// its record live while it is held: another owner is refused, the holder
// renews and completes, and so after a takeover and a renewal past the
// stored expiry. The record once expired at acquire + TTL under its live
// lease: a second owner took the key and the holder's writes were lost.
func testLeaseOutlivesTTL(t *testing.T, s store.Store) {
	p := acq("K", "o1", at(0))
	p.LeaseUntil, p.DedupUntil, p.ExpiresAt = at(10*time.Minute), at(0), at(time.Minute)
	acquire(t, s, p)
	if got := acquire(t, s, acq("K", "o2", at(2*time.Minute))); got.Acquired {
		t.Fatal("another owner took a key held under a live lease past its TTL")
	}
	wantOK(t, "renew past the TTL", renew(t, s, "K", "o1", at(20*time.Minute), at(9*time.Minute)))
	if got := acquire(t, s, acq("K", "o2", at(15*time.Minute))); got.Acquired {
		t.Fatal("another owner took a key whose lease was renewed past its stored expiry")
	}
	wantOK(t, "release", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "K", Owner: "o1"}))
	// A takeover (a free, unexpired record) whose lease outlives the stored expiry.
	q := acq("K", "o2", at(16*time.Minute))
	q.LeaseUntil = at(40 * time.Minute)
	if got := acquire(t, s, q); !got.Acquired {
		t.Fatalf("acquire after release: held by %q", got.Record.LeaseOwner)
	}
	if got := acquire(t, s, acq("K", "o3", at(30*time.Minute))); got.Acquired {
		t.Fatal("another owner took a key taken over under a live lease past the stored expiry")
	}
	wantOK(t, "complete within the lease", complete(t, s, "K", "o2", `"r"`, at(35*time.Minute)))
	if r := record(t, s, "default", "K", at(36*time.Minute)); r.Status != idemtype.RecordCompleted || string(r.Result) != `"r"` {
		t.Errorf("after completion: status %s result %q", r.Status, r.Result)
	}
}
