package pgstore

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestDatabaseClockDecidesExpiry runs a normal node and a node whose clock
// runs one hour ahead against the default store (the database's clock
// decides expiry): the fast node neither rescues the live lease nor takes
// over the live leader, and the normal node keeps both.
func TestDatabaseClockDecidesExpiry(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	ctx := t.Context()
	fast := func() time.Time { return time.Now().Add(time.Hour) }

	lease := runningLease(t, s)

	t.Run("fast node does not rescue a live lease", func(t *testing.T) {
		got, err := s.JobRescue(ctx, &store.JobRescueParams{Now: fast(), Limit: 10})
		if err != nil || len(got) != 0 {
			t.Fatalf("rescued %v, %v; want none", got, err)
		}
	})
	t.Run("a heartbeat extends the lease by the database clock", func(t *testing.T) {
		errs, err := s.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{Leases: []store.Lease{lease},
			Until: time.Now().Add(time.Minute), Now: time.Now()})
		if err != nil || errs[0] != nil {
			t.Fatalf("heartbeat: %v %v", errs, err)
		}
		row, err := s.JobGet(ctx, &store.JobGetParams{ID: lease.ID})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Until(*row.LeaseExpiresAt); d < 30*time.Second || d > 2*time.Minute {
			t.Fatalf("lease ends in %v, want about a minute by the database clock", d)
		}
	})
	t.Run("fast node does not take over a live leader", func(t *testing.T) {
		attempt := func(owner string, now time.Time) bool {
			ok, err := s.LeaderAttempt(ctx, &store.LeaderParams{Name: "m", Owner: owner, TTL: 30 * time.Second, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !attempt("normal", time.Now()) {
			t.Fatal("normal node not elected")
		}
		if attempt("fast", fast()) {
			t.Fatal("fast node took over a live leader")
		}
		if !attempt("normal", time.Now()) {
			t.Fatal("normal node lost its term")
		}
	})
	t.Run("an expired lease is rescued by the database clock", func(t *testing.T) {
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("k2")}}); err != nil {
			t.Fatal(err)
		}
		p := claimParams(1)
		p.LeaseUntil = time.Now().Add(-time.Second)
		jobs, err := s.JobClaim(ctx, p)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		got, err := s.JobRescue(ctx, &store.JobRescueParams{Now: time.Now().Add(-time.Hour), Limit: 10})
		if err != nil || len(got) != 1 || got[0].ID != jobs[0].ID {
			t.Fatalf("rescued %v, %v; want [%d]", got, err, jobs[0].ID)
		}
	})
}

// acquireRecordAt asks for owner's lease of the record "k" of tenant "t"
// for lease from now, by a node whose clock says now, and reports whether
// it got it.
func acquireRecordAt(t *testing.T, s *Store, owner string, now time.Time, lease time.Duration) bool {
	t.Helper()
	res, err := s.RecordAcquire(t.Context(), &store.RecordAcquireParams{Tenant: "t", Key: "k", Owner: owner,
		LeaseUntil: now.Add(lease), DedupUntil: now, ExpiresAt: now.Add(24 * time.Hour), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return res.Acquired
}

// TestDatabaseClockDecidesRecordLeases: a record lease (Do, the HTTP
// middleware, result leases) held by a normal node is not taken over by a
// node whose clock runs one hour ahead; once the lease really lapsed by the
// database's clock, another owner takes it.
func TestDatabaseClockDecidesRecordLeases(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	if !acquireRecordAt(t, s, "normal", time.Now(), time.Minute) {
		t.Fatal("normal node did not get the lease")
	}
	if acquireRecordAt(t, s, "fast", time.Now().Add(time.Hour), time.Minute) {
		t.Fatal("a node one hour ahead took over a live record lease")
	}
	// The owner renews its lease to end a second ago: by the database's
	// clock it has lapsed, and another owner takes it.
	if !acquireRecordAt(t, s, "normal", time.Now(), -time.Second) {
		t.Fatal("the owner could not renew its own lease")
	}
	if !acquireRecordAt(t, s, "other", time.Now(), time.Minute) {
		t.Fatal("a lapsed record lease was not taken over")
	}
}

// TestDatabaseClockDecidesRecordLeasesPastTheirExpiry: a record lease whose
// record expires with it (a result TTL no longer than the lease) is not
// taken over by a node whose clock runs one hour ahead either: by that
// node's clock the record had expired, and an expired record was taken
// whatever its live lease said.
func TestDatabaseClockDecidesRecordLeasesPastTheirExpiry(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	now := time.Now()
	res, err := s.RecordAcquire(t.Context(), &store.RecordAcquireParams{Tenant: "t", Key: "k", Owner: "normal",
		LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Second), Now: now})
	if err != nil || !res.Acquired {
		t.Fatalf("normal node: %+v %v", res, err)
	}
	fast := time.Now().Add(time.Hour)
	// Refused, and answered as held by the normal node: the read of the
	// holder sees the record its live lease keeps (once it found none by
	// the fast clock and answered an untyped "no rows in result set", so
	// Do failed instead of answering ErrKeyInProgress).
	fastParams := func(owner string) *store.RecordAcquireParams {
		return &store.RecordAcquireParams{Tenant: "t", Key: "k", Owner: owner,
			LeaseUntil: fast.Add(time.Minute), DedupUntil: fast, ExpiresAt: fast.Add(time.Second), Now: fast}
	}
	res, err = s.RecordAcquire(t.Context(), fastParams("fast"))
	if err != nil || res.Acquired || res.Record == nil || res.Record.LeaseOwner != "normal" {
		t.Fatalf("acquire one hour ahead: %+v, %v; want refused, held by normal", res, err)
	}
	many, err := s.RecordAcquireMany(t.Context(), []*store.RecordAcquireParams{fastParams("fast"), fastParams("fast2")})
	if err != nil || many[0].Acquired || many[1].Acquired || many[0].Record == nil || many[0].Record.LeaseOwner != "normal" ||
		many[1].Record == nil || many[1].Record.LeaseOwner != "normal" {
		t.Fatalf("batch acquire one hour ahead: %+v, %v; want both refused, held by normal", many, err)
	}
	// Nor does the expiry sweep of a leader one hour ahead delete it (a
	// fresh record for the next caller).
	if n, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: fast, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("sweep one hour ahead: %d deleted, %v; want the held record kept", n, err)
	}
	res, err = s.RecordAcquire(t.Context(), &store.RecordAcquireParams{Tenant: "t", Key: "k", Owner: "other",
		LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Second), Now: time.Now()})
	if err != nil || res.Acquired {
		t.Fatalf("acquire by a normal node after the sweep: %+v %v; want the key held", res, err)
	}
}

// TestDatabaseClockDecidesStoredJobLeases: the same for a stored lease on
// a record that names a job (a job's own stored lease, or a Do lease on
// the record of a job whose result expired): the guard once covered only
// records without a job, so a node one hour ahead took such a lease and
// its sweep deleted the record.
func TestDatabaseClockDecidesStoredJobLeases(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	now := time.Now()
	res, err := s.RecordAcquire(t.Context(), &store.RecordAcquireParams{Tenant: "t", Key: "k", Owner: store.JobOwner(99), JobID: 99,
		LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Second), Now: now})
	if err != nil || !res.Acquired {
		t.Fatalf("job's lease: %+v %v", res, err)
	}
	fast := time.Now().Add(time.Hour)
	res, err = s.RecordAcquire(t.Context(), &store.RecordAcquireParams{Tenant: "t", Key: "k", Owner: "fast",
		LeaseUntil: fast.Add(time.Minute), DedupUntil: fast, ExpiresAt: fast.Add(time.Second), Now: fast})
	if err == nil && res.Acquired {
		t.Fatal("a node one hour ahead took over a job's live stored lease past its record's expiry by its clock")
	}
	if n, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: fast, Limit: 10}); err != nil || n != 0 {
		t.Fatalf("sweep one hour ahead: %d deleted, %v; want the held record kept", n, err)
	}
}

// TestDatabaseClockKeepsStoredJobLeaseFromAFastInsert: job a runs holding
// a stored lease on its key (its record was started afresh by its acquire)
// until one minute from now by the database's clock. A node one hour ahead
// inserts job b of the key (a new job: the window passed by its clock):
// the record then names b but keeps a's lease, so b's claim does not
// report its key held and b waits behind a instead of running beside it.
func TestDatabaseClockKeepsStoredJobLeaseFromAFastInsert(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	ctx := t.Context()
	keyed := func(kind string, now time.Time) *store.JobInsertParams {
		p := job(kind)
		p.RunAt, p.IdempotencyKey, p.Fingerprint = now, "k", "fp"
		p.DedupWindow, p.ResultTTL = time.Second, time.Hour
		return p
	}
	now := time.Now()
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{keyed("a", now)}, Now: now}); err != nil {
		t.Fatal(err)
	}
	// a's record is deleted before a runs (a running job's is not), so a's
	// acquire starts it afresh: a stored lease.
	if err := s.RecordDelete(ctx, &store.RecordDeleteParams{Tenant: "default", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaim(ctx, claimParams(1))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim of a: %v %v", jobs, err)
	}
	a := jobs[0]
	res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "k", Owner: store.JobOwner(a.ID),
		JobID: a.ID, LeaseUntil: *a.LeaseExpiresAt, DedupUntil: now, ExpiresAt: now.Add(time.Second), Now: now})
	if err != nil || !res.Acquired {
		t.Fatalf("a's acquire: %+v %v", res, err)
	}

	fast := time.Now().Add(time.Hour)
	r, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{keyed("b", time.Now())}, Now: fast})
	if err != nil || r[0].Err != nil {
		t.Fatalf("insert of b one hour ahead: %+v %v", r, err)
	}
	rec, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "k", Now: time.Now()})
	if err != nil {
		t.Fatalf("record after b's insert: %v", err)
	}
	if rec.LeaseOwner != store.JobOwner(a.ID) {
		t.Errorf("after an insert one hour ahead, the record's lease owner is %q, want %q (a runs until %v)",
			rec.LeaseOwner, store.JobOwner(a.ID), *a.LeaseExpiresAt)
	}
	jobs, err = s.JobClaim(ctx, claimParams(1))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim of b: %v %v", jobs, err)
	}
	if jobs[0].KeyHeld {
		t.Errorf("b's claim reports its key held while a runs holding it: two executions of one key at once")
	}
}

// TestDatabaseClockKeepsASlowNodesLease: a node whose clock runs behind
// the database's claims a job with a lease that, by its own clock, lasts
// five minutes; by the database's clock, which decides expiry, that end
// lies in the past. The lease still lasts its length by the database's
// clock: the rescuer does not take the job back while the worker runs it
// (it used to at its next run, and the job ran twice), and the slow
// node's heartbeat extends it. Both claim paths: the fast one (a queue
// without limits) and the general one (a queue under a limit).
func TestDatabaseClockKeepsASlowNodesLease(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	ctx := t.Context()
	slow := time.Now().Add(-time.Hour)
	if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: store.Limit{
		FlowScope: store.FlowScope{Queue: "limited"}, Concurrency: 10}, Now: slow}); err != nil {
		t.Fatal(err)
	}
	for _, queue := range []string{"default", "limited"} {
		j := job("k-" + queue)
		j.Queue, j.RunAt = queue, slow
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{j}, Now: slow}); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, WorkerID: "slow", Limit: 1,
			LeaseUntil: slow.Add(5 * time.Minute), Now: slow})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("%s: claim: %v %v", queue, jobs, err)
		}
		got, err := s.JobRescue(ctx, &store.JobRescueParams{Now: time.Now(), Limit: 10})
		if err != nil || len(got) != 0 {
			t.Fatalf("%s: the rescuer took %v (%v) a moment after a five-minute claim of a node an hour behind", queue, got, err)
		}
		errs, err := s.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{
			Leases: []store.Lease{{ID: jobs[0].ID, Token: jobs[0].LeaseToken}},
			Until:  slow.Add(5 * time.Minute), Now: slow})
		if err != nil || errs[0] != nil {
			t.Fatalf("%s: the slow node's heartbeat: %v %v", queue, errs, err)
		}
	}
}

// TestDatabaseClockKeepsASlowNodesRecordLease: a record lease (Do, the HTTP
// middleware, result leases) taken, then renewed, by a node whose clock
// runs an hour behind the database's lasts its length by the database's
// clock: a node with a right clock does not take it over meanwhile (it
// did at once, and ran the call a second time).
func TestDatabaseClockKeepsASlowNodesRecordLease(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	ctx := t.Context()
	slow := time.Now().Add(-time.Hour)
	if !acquireRecordAt(t, s, "slow", slow, 5*time.Minute) {
		t.Fatal("the slow node did not get the lease")
	}
	if acquireRecordAt(t, s, "normal", time.Now(), time.Minute) {
		t.Fatal("a node with a right clock took over the live five-minute record lease of a node an hour behind")
	}
	if err := s.RecordRenew(ctx, &store.RecordRenewParams{Tenant: "t", Key: "k", Owner: "slow",
		LeaseUntil: slow.Add(5 * time.Minute), Now: slow}); err != nil {
		t.Fatalf("the slow node's renewal: %v", err)
	}
	if acquireRecordAt(t, s, "normal", time.Now(), time.Minute) {
		t.Fatal("a node with a right clock took over the renewed record lease of a node an hour behind")
	}
}

// TestDatabaseClockKeepsLiveRecordsFromAFastSweep: the expiry sweep of a
// maintenance leader whose clock runs two hours ahead does not delete a
// record whose dedup window and result still live for an hour by the
// database's clock (and by every other node's): it deleted it, and the
// next enqueue of the key on any node made a second job.
func TestDatabaseClockKeepsLiveRecordsFromAFastSweep(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	ctx := t.Context()
	now := time.Now()
	done := completedKeyed(t, s, now, time.Hour)
	fast := now.Add(2 * time.Hour)
	if _, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: fast, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "K", Now: now})
	if err != nil || rec == nil || rec.JobID != done.ID || rec.Result == nil {
		t.Fatalf("record after a sweep two hours ahead: %+v %v; want it live with its result", rec, err)
	}
}

// TestDatabaseClockKeepsJobsOfLiveRecordsFromAFastRetention: a keyed job
// finished now, its record live for two hours (its dedup window). A
// maintenance leader three hours ahead runs retention of one hour: by its
// clock the record has expired, so it deleted the job its live record
// names (the record was then gone with it for every other node). The
// database's clock decides: the job stays.
func TestDatabaseClockKeepsJobsOfLiveRecordsFromAFastRetention(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	ctx := t.Context()
	now := time.Now()
	done := completedKeyed(t, s, now, 2*time.Hour)
	fast := now.Add(3 * time.Hour)
	before := fast.Add(-time.Hour)
	if _, err := s.JobDeleteFinished(ctx, &store.JobDeleteFinishedParams{CompletedBefore: before, CancelledBefore: before,
		DeadBefore: before, Limit: 10, Now: fast}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobGet(ctx, &store.JobGetParams{ID: done.ID}); err != nil {
		t.Fatalf("job after a retention run three hours ahead: %v; want it kept while its record lives", err)
	}
	rec, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "K", Now: now})
	if err != nil || rec.JobID != done.ID {
		t.Fatalf("record: %+v %v; want it naming job %d", rec, err, done.ID)
	}
}

// completedKeyed inserts job "k" of key "K" at now with a dedup window and
// result TTL of window, claims it and completes it with a result at now.
func completedKeyed(t *testing.T, s *Store, now time.Time, window time.Duration) *idemtype.JobRow {
	t.Helper()
	ctx := t.Context()
	j := job("k")
	j.IdempotencyKey, j.Fingerprint, j.DedupWindow, j.ResultTTL, j.RunAt = "K", "fp", window, window, now
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{j}, Now: now})
	if err != nil || res[0].Err != nil {
		t.Fatalf("insert: %v %+v", err, res)
	}
	jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 1,
		LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	fin := complete(jobs[0])
	fin.FinishedAt, fin.RecordResult, fin.ResultHash = now, []byte(`{}`), "h"
	if errs, err := s.JobFinishMany(ctx, []*store.JobFinishParams{fin}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	return jobs[0]
}

// TestDatabaseClockHeartbeatAbsolute: on the database's clock a heartbeat
// stores the database's now plus the lease's length (Until - Now), but
// one with store.JobHeartbeatParams.Absolute stores Until itself, and
// reports it in Ends: a pull claim caps a lease at the job's timeout
// deadline, an instant the claim reports. The caller's clock runs a
// second behind the database's, so the two differ by about a second.
func TestDatabaseClockHeartbeatAbsolute(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{})
	ctx := t.Context()
	lease := runningLease(t, s)
	heartbeat := func(absolute bool) (until, stored, reported time.Time) {
		t.Helper()
		now := time.Now().Add(-time.Second) // the caller's clock
		until = now.Add(30 * time.Second)
		ends := make([]time.Time, 1)
		errs, err := s.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{Leases: []store.Lease{lease},
			Until: until, Now: now, Absolute: absolute, Ends: ends})
		if err != nil || errs[0] != nil {
			t.Fatalf("heartbeat: %v %v", errs, err)
		}
		row, err := s.JobGet(ctx, &store.JobGetParams{ID: lease.ID})
		if err != nil {
			t.Fatal(err)
		}
		return until.Truncate(time.Microsecond), *row.LeaseExpiresAt, ends[0]
	}
	until, stored, reported := heartbeat(false)
	if d := stored.Sub(until); d < 500*time.Millisecond || d > 10*time.Second {
		t.Errorf("relative heartbeat stored %v, %v after Until; want about a second (the database's clock)", stored, d)
	}
	if !reported.Equal(stored) {
		t.Errorf("relative heartbeat reported %v, stored %v", reported, stored)
	}
	until, stored, reported = heartbeat(true)
	if !stored.Equal(until) || !reported.Equal(until) {
		t.Errorf("absolute heartbeat stored %v, reported %v; want Until %v", stored, reported, until)
	}
}

// runningLease inserts a job of kind "k" and claims it (claimParams(1)),
// returning its lease.
func runningLease(t *testing.T, s *Store) store.Lease {
	t.Helper()
	if _, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("k")}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaim(t.Context(), claimParams(1))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	return store.Lease{ID: jobs[0].ID, Token: jobs[0].LeaseToken}
}
