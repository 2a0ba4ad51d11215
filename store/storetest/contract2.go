package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// contractCases test the lead's contract decisions on result expiry, tenant
// scoped FIFO partitions and expired (not yet rescued) leases.
func contractCases() []testCase {
	return []testCase{
		{"Records/cached_result_kept_after_window_zero_reopen", testResultKeptWindowZero},
		{"Records/reopen_expiry_is_max_of_window_and_result", testReopenExpiry},
		{"JobClaim/partitions_scoped_by_tenant", testPartitionTenants},
		{"JobHeartbeatMany/expired_lease_lost", testHeartbeatExpired},
		{"JobFinishMany/expired_lease_not_rescued_accepted", testFinishExpiredLease},
	}
}

func testResultKeptWindowZero(t *testing.T, s store.Store) {
	const ttl = 24 * time.Hour
	zero := func(kind string) *store.JobInsertParams {
		p := keyed(kind, "K", "fp")
		p.DedupWindow = 0
		p.ResultTTL = ttl
		return p
	}
	j1 := insert1(t, s, at(0), zero("k1"))
	completeJob(t, s, j1, at(0), `"R"`) // completed at at(1s)
	done := at(time.Second)
	r := record(t, s, "default", "K", done)
	wantTimeP(t, "ExpiresAt after job 1", r.ExpiresAt, done.Add(ttl))

	// The window reopened: job 2; the record blocks while job 2 is
	// unfinished (ExpiresAt nil) and still holds job 1's result.
	j2 := insert1(t, s, at(time.Minute), zero("k2"))
	if j2.ID == j1.ID {
		t.Fatalf("no new job after the window-0 job finished")
	}
	r = record(t, s, "default", "K", at(time.Minute))
	if r.JobID != j2.ID || r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID {
		t.Errorf("reopened record: job %d status %s result job %d, want %d completed %d", r.JobID, r.Status, r.ResultJobID, j2.ID, j1.ID)
	}
	wantNil(t, "ExpiresAt of a reopened window-0 record", r.ExpiresAt)
	wantNil(t, "DedupUntil of a reopened window-0 record", r.DedupUntil)

	// Job 2 completes from the cache.
	c := claimJob(t, s, j2, at(2*time.Minute))
	fin := at(3 * time.Minute)
	p := completion(c, `"R"`, fin)
	p.WasCached, p.OriginalJobID, p.Outcome = true, j1.ID, idemtype.OutcomeCached
	finish1(t, s, p)
	r = record(t, s, "default", "K", fin)
	if r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID || string(r.Result) != `"R"` {
		t.Errorf("record after a cached finish: status %s result job %d result %s, want completed %d \"R\"",
			r.Status, r.ResultJobID, r.Result, j1.ID)
	}
	wantTimeP(t, "CompletedAt after a cached finish", r.CompletedAt, done)
	wantTimeP(t, "DedupUntil after a cached finish (window 0)", r.DedupUntil, fin)
	wantTimeP(t, "ExpiresAt after a cached finish (window 0)", r.ExpiresAt, done.Add(ttl))
	record(t, s, "default", "K", done.Add(ttl-time.Microsecond))
	if _, err := s.RecordGet(t.Context(), "default", "K", done.Add(ttl)); err == nil {
		t.Errorf("record still live at its expiry")
	}

	// A dead job 3 does not drop the result either.
	j3 := insert1(t, s, at(4*time.Minute), zero("k3"))
	killJob(t, s, j3, at(5*time.Minute))
	r = record(t, s, "default", "K", at(6*time.Minute))
	wantTimeP(t, "ExpiresAt after a dead window-0 job", r.ExpiresAt, done.Add(ttl))
	if r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID {
		t.Errorf("record after a dead job: status %s result job %d", r.Status, r.ResultJobID)
	}
}

func testReopenExpiry(t *testing.T, s store.Store) {
	// Window 1 h, TTL 24 h, completed at at(1m+1s).
	done := at(time.Minute + time.Second)
	for _, tc := range []struct {
		key  string
		ttl  time.Duration
		want time.Time // ExpiresAt after the reopen at at(2h)
	}{
		{"LONG", 48 * time.Hour, done.Add(48 * time.Hour)}, // the result outlives the window
		{"SHORT", time.Hour / 2, at(3 * time.Hour)},        // the window outlives the result
	} {
		j1 := insert1(t, s, at(0), keyed("k1"+tc.key, tc.key, "fp"))
		completeJob(t, s, j1, at(time.Minute), `1`)
		p := keyed("k2"+tc.key, tc.key, "fp")
		p.ResultTTL = tc.ttl
		j2 := insert1(t, s, at(2*time.Hour), p)
		r := record(t, s, "default", tc.key, at(2*time.Hour))
		if r.JobID != j2.ID || r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID {
			t.Errorf("%s: record job %d status %s result job %d", tc.key, r.JobID, r.Status, r.ResultJobID)
		}
		wantTimeP(t, tc.key+": DedupUntil after reopen", r.DedupUntil, at(3*time.Hour))
		wantTimeP(t, tc.key+": ExpiresAt after reopen", r.ExpiresAt, tc.want)
	}
	// A record without a result (its job died) expires with the new window.
	d1 := insert1(t, s, at(0), keyed("kd1", "DEAD", "fp"))
	killJob(t, s, d1, at(time.Minute))
	insert1(t, s, at(2*time.Hour), keyed("kd2", "DEAD", "fp"))
	r := record(t, s, "default", "DEAD", at(2*time.Hour))
	wantTimeP(t, "DEAD: ExpiresAt after reopen", r.ExpiresAt, at(3*time.Hour))
}

func testPartitionTenants(t *testing.T, s store.Store) {
	mk := func(kind, tenant string) *store.JobInsertParams {
		p := partitioned(kind, "q", "P")
		p.Tenant = tenant
		return p
	}
	js := insertNew(t, s, at(0), mk("a1", "a"), mk("b1", "b"), mk("a2", "a"), mk("b2", "b"))
	a1, b1, a2, b2 := js[0], js[1], js[2], js[3]
	got := claim(t, s, at(0), 10, "q")
	wantIDSet(t, "heads of the two tenants' partitions", ids(got), []int64{a1.ID, b1.ID})
	for _, c := range got {
		if c.ID == b1.ID {
			finish1(t, s, completion(c, `1`, at(time.Second)))
		}
	}
	wantIDs(t, "after tenant b's head completed", ids(claim(t, s, at(2*time.Second), 10, "q")), []int64{b2.ID})
	if again := claim(t, s, at(2*time.Second), 10, "q"); len(again) != 0 {
		t.Errorf("claimed %v while tenant a's head runs", ids(again))
	}
	_ = a2
}

func testHeartbeatExpired(t *testing.T, s store.Store) {
	insertNew(t, s, at(0), newJob("k"), newJob("k"))
	c := claim(t, s, at(0), 2) // leases until at(lease)
	errs := heartbeat(t, s, at(lease+10*time.Minute), at(lease), leaseOf(c[0]))
	wantErr(t, "heartbeat at the lease expiry", errs[0], idemtype.ErrLeaseLost)
	got := wantState(t, s, c[0].ID, idemtype.StateRunning)
	wantTimeP(t, "LeaseExpiresAt after a refused heartbeat", got.LeaseExpiresAt, at(lease))
	wantOK(t, "heartbeat just before the expiry",
		heartbeat(t, s, at(lease+10*time.Minute), at(lease-time.Microsecond), leaseOf(c[1]))[0])
}

func testFinishExpiredLease(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), keyed("k", "K", "fp"))
	c := claimJob(t, s, j, at(0))
	fin := at(lease + time.Minute) // expired, not rescued
	finish1(t, s, completion(c, `"late"`, fin))
	got := wantState(t, s, j.ID, idemtype.StateCompleted)
	wantJSON(t, "Result of a late completion", got.Result, `"late"`)
	wantNoLease(t, got)
	if as := attempts(t, s, j.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeCompleted {
		t.Errorf("attempts %s, want one completed", fmtAttempts(as))
	}
	if r := record(t, s, "default", "K", fin); r.Status != idemtype.RecordCompleted || r.ResultJobID != j.ID {
		t.Errorf("record after a late completion: status %s result job %d", r.Status, r.ResultJobID)
	}
	if got := rescue(t, s, fin.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("rescued %v after the late completion", got)
	}
}
