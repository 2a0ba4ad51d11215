package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The record of a job whose dedup window ends while the job runs
// (docs/state-machine.md, "Idempotency keys"): its stored expiry is the
// window's end, but the running job still holds it by its job lease, so it
// is not expired for acquirers, for a new job of the key, for the expiry
// sweep or for readers until the job lease lapses; the job's completion is
// then cached for its result TTL.
func recordWindowCases() []testCase {
	return []testCase{
		{"RecordLease/window_ending_while_the_job_runs_keeps_its_lease", testWindowEndsWhileRunning},
		{"Records/record_of_a_running_job_outlives_its_window_and_caches_its_result", testRecordOutlivesWindow},
	}
}

// windowed returns keyed params with a one-minute window and result TTL ttl.
func windowed(kind, key string, ttl time.Duration) *store.JobInsertParams {
	p := keyed(kind, key, "fp")
	p.DedupWindow, p.ResultTTL = time.Minute, ttl
	return p
}

// runWindowed inserts a job of key (window 1 min, result TTL ttl) at 0 and
// claims it at 10 s (its lease ends at 10 s + lease); it holds its key.
func runWindowed(t *testing.T, s store.Store, key string, ttl time.Duration) *idemtype.JobRow {
	t.Helper()
	j := insert1(t, s, at(0), windowed("a-"+key, key, ttl))
	c := claimJob(t, s, j, at(10*time.Second))
	res, err := jobAcquire(t.Context(), s, c, at(10*time.Second))
	if err != nil || !res.Acquired {
		t.Fatalf("job of %s could not take its own key: %+v %v", key, res, err)
	}
	return c
}

// testWindowEndsWhileRunning: job a's window ends at 1 min while it runs
// under a job lease until 5 min 10 s. At 2 min a Do caller and another
// job's owner are refused and see a as the holder; a new job b of the key
// (a new job: the window passed) reopens the record with a's lease written
// in, is not reported KeyHeld by its claim and is refused by its acquire;
// a heartbeat of a extends the lease b waits behind. Once a's lease lapses
// b takes the key. Readers and stats show the record live meanwhile.
func testWindowEndsWhileRunning(t *testing.T, s store.Store) {
	ca := runWindowed(t, s, "K", time.Hour)
	owner, aLease := store.JobOwner(ca.ID), *ca.LeaseExpiresAt
	now := at(2 * time.Minute)
	r := record(t, s, "default", "K", now)
	if r.Status != idemtype.RecordInProgress || r.JobID != ca.ID {
		t.Errorf("record at 2m: status %s job %d, want in progress, job %d", r.Status, r.JobID, ca.ID)
	}
	wantHolder(t, "RecordGet at 2m", r, owner, aLease)
	if r.ExpiresAt == nil || !r.ExpiresAt.After(now) {
		t.Errorf("live record at 2m reads ExpiresAt %v, want later than now", r.ExpiresAt)
	}
	st, err := s.RecordStats(t.Context(), &store.RecordStatsParams{Tenant: "default", Now: now})
	if err != nil {
		t.Fatalf("RecordStats: %v", err)
	}
	if st.Entries != 1 || st.InProgress != 1 || st.Expired != 0 {
		t.Errorf("RecordStats at 2m: %+v, want 1 live record in progress, none expired", st)
	}
	for _, other := range []*store.RecordAcquireParams{acq("K", "do:x", now),
		{Tenant: "default", Key: "K", Owner: "job:999", JobID: 999, LeaseUntil: now.Add(time.Minute),
			DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now}} {
		got := acquire(t, s, other)
		if got.Acquired {
			t.Fatalf("%s acquired key K at 2m while job %d runs holding it (lease until %v)", other.Owner, ca.ID, aLease)
		}
		wantHolder(t, other.Owner+" refused", got.Record, owner, aLease)
	}

	rb := insertAll(t, s, now, windowed("b", "K", time.Hour))[0]
	if rb.Err != nil || rb.Existing || rb.Job == nil {
		t.Fatalf("insert of b after a's window: %+v, want a new job", rb)
	}
	r = record(t, s, "default", "K", now)
	if r.JobID != rb.Job.ID {
		t.Errorf("reopened record names job %d, want b %d", r.JobID, rb.Job.ID)
	}
	wantHolder(t, "reopened record", r, owner, aLease)
	cb := claimJob(t, s, rb.Job, now)
	if cb.KeyHeld {
		t.Errorf("b's claim reports its key held while a runs holding it")
	}
	if got := acquire(t, s, ownAcquire(cb, now)); got.Acquired {
		t.Fatalf("b acquired key K while a runs holding it: two executions of one key at once")
	} else {
		wantHolder(t, "b refused", got.Record, owner, aLease)
	}
	wantOK(t, "heartbeat", heartbeat(t, s, at(6*time.Minute), at(3*time.Minute), leaseOf(ca))[0])
	if got := acquire(t, s, ownAcquire(cb, at(5*time.Minute+30*time.Second))); got.Acquired {
		t.Errorf("b acquired key K past a's old lease end but within its heartbeat's")
	}
	late := at(6*time.Minute + time.Second) // a's lease lapsed
	if got := acquire(t, s, ownAcquire(cb, late)); !got.Acquired {
		t.Errorf("b could not take key K once a's lease lapsed: %+v", got.Record)
	}
}

// testRecordOutlivesWindow: the expiry sweep passes over the records of
// running jobs whose windows ended (K, and K2 with a short result TTL),
// and deletes the one whose job lease lapsed (K3: a stale attempt loses its
// key). The jobs then complete; each result is cached until the later of
// the window's end and the finish plus the job's result TTL.
func testRecordOutlivesWindow(t *testing.T, s store.Store) {
	ca := runWindowed(t, s, "K", time.Hour)
	ca2 := runWindowed(t, s, "K2", 10*time.Minute)
	runWindowed(t, s, "K3", time.Hour)
	sweep := func(now time.Time) int {
		t.Helper()
		n, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: now, Limit: 100})
		if err != nil {
			t.Fatalf("RecordDeleteExpired: %v", err)
		}
		return n
	}
	if n := sweep(at(90 * time.Second)); n != 0 {
		t.Errorf("sweep at 90s deleted %d records of running jobs", n)
	}
	for _, k := range []string{"K", "K2", "K3"} {
		if r := record(t, s, "default", k, at(90*time.Second)); r.Status != idemtype.RecordInProgress {
			t.Errorf("record %s at 90s: %s, want in progress", k, r.Status)
		}
	}
	errs := heartbeat(t, s, at(20*time.Minute), at(3*time.Minute), leaseOf(ca), leaseOf(ca2))
	wantOK(t, "heartbeat K", errs[0])
	wantOK(t, "heartbeat K2", errs[1])
	if n := sweep(at(6 * time.Minute)); n != 1 {
		t.Errorf("sweep at 6m deleted %d records, want 1 (K3, whose job lease lapsed)", n)
	}
	if _, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K3", Now: at(6 * time.Minute)}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Errorf("K3 at 6m: %v, want not found", err)
	}
	fin := at(7 * time.Minute)
	finish1(t, s, completion(ca, `"A"`, fin))
	finish1(t, s, completion(ca2, `"A2"`, fin))
	for _, c := range []struct {
		key, res string
		until    time.Time
	}{{"K2", `"A2"`, fin.Add(10 * time.Minute)}, {"K", `"A"`, fin.Add(time.Hour)}} {
		r := record(t, s, "default", c.key, at(8*time.Minute))
		if r.Status != idemtype.RecordCompleted || string(r.Result) != c.res {
			t.Errorf("record %s after completion: status %s result %s, want completed %s", c.key, r.Status, r.Result, c.res)
		}
		wantTimeP(t, c.key+" ExpiresAt", r.ExpiresAt, c.until)
		sweep(c.until.Add(-time.Second))
		record(t, s, "default", c.key, c.until.Add(-time.Second)) // the sweep kept it
		if _, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: c.key, Now: c.until}); !errors.Is(err, idemtype.ErrNotFound) {
			t.Errorf("%s at its result's expiry: %v, want not found", c.key, err)
		}
	}
}
