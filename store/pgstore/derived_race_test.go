package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// The cases below are the review of the derived completion (derivedJoin):
// each failed before its fix, where a written completion had passed.

const derivedResult = `{"answer": 42}`

func derivedHash() string { s := sha256.Sum256([]byte(derivedResult)); return hex.EncodeToString(s[:]) }

// derivedSetup inserts the keys "derived" and "compressed" (window w,
// result TTL 7 days) at now and claims their jobs; it returns them by key.
func derivedSetup(t *testing.T, s *Store, now time.Time, w time.Duration) map[string]*idemtype.JobRow {
	t.Helper()
	ctx := t.Context()
	var ps []*store.JobInsertParams
	for _, k := range []string{"derived", "compressed"} {
		p := benchJob()
		p.Queue, p.RunAt, p.IdempotencyKey, p.Fingerprint = "rq", now, k, "fp"
		p.DedupWindow, p.ResultTTL = w, 7*24*time.Hour
		ps = append(ps, p)
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"rq"}, WorkerID: "w", Limit: 2,
		LeaseUntil: now.Add(time.Hour), Now: now})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	m := map[string]*idemtype.JobRow{}
	for _, j := range jobs {
		m[j.IdempotencyKey] = j
	}
	return m
}

// derivedFinish completes the jobs of derivedSetup at fin: "derived" with a
// record result the store derives, "compressed" with one it writes.
func derivedFinish(t *testing.T, s *Store, jobs map[string]*idemtype.JobRow, fin time.Time) {
	t.Helper()
	var fs []*store.JobFinishParams
	for k, j := range jobs {
		f := &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(derivedResult), FinishedAt: fin, DurationMS: 3,
			RecordResult: []byte(derivedResult), ResultHash: derivedHash()}
		if k == "compressed" {
			f.RecordResult, f.RecordCompressed = []byte{0x1f, 0x8b, 1, 2}, true
		}
		fs = append(fs, f)
	}
	if errs, err := s.JobFinishMany(t.Context(), fs); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
}

// TestStaleAttemptOfCompletedJobGetsTheCache: a stale attempt of job J (its
// lease lapsed and another attempt completed J) that acquires J's key, in
// the window and after it, is refused and reads the cached result, as it
// was behind a written completion (the acquire locks and reads the job its
// record names even when it is the acquirer's own).
func TestStaleAttemptOfCompletedJobGetsTheCache(t *testing.T) {
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	jobs := derivedSetup(t, s, now, time.Hour)
	derivedFinish(t, s, jobs, now.Add(time.Second))
	for _, k := range []string{"compressed", "derived"} {
		for _, at := range []time.Duration{2 * time.Second, 2 * time.Hour} { // in the window, after it
			n := now.Add(at)
			j := jobs[k]
			res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: k,
				Owner: store.JobOwner(j.ID), JobID: j.ID, LeaseUntil: n.Add(time.Minute), DedupUntil: n,
				ExpiresAt: n.Add(7 * 24 * time.Hour), Now: n})
			if err != nil {
				t.Fatal(err)
			}
			if res.Acquired || res.Record.Status != idemtype.RecordCompleted || string(res.Record.Result) != derivedResult && k == "derived" {
				t.Errorf("%s at +%v: a completed job's stale attempt: acquired %v, record %+v", k, at, res.Acquired, res.Record)
			}
		}
	}
}

// TestSweepRacingACompletion: the expiry sweep's snapshot sees the job still
// running past the record's window; the job's completion commits before
// the sweep locks the record. Both records (the written completion and the
// derived one) must stay: their results live 7 more days. The gate (an
// advisory lock taken in the sweep's first scan) holds the sweep after its
// snapshot, as a slow statement would.
func TestSweepRacingACompletion(t *testing.T) {
	s := newTestStore(t, 6)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	jobs := derivedSetup(t, s, now, time.Minute)
	at := now.Add(2 * time.Minute) // the window (1 min) has passed; the jobs still run
	release := gatedSweep(t, s, at)
	derivedFinish(t, s, jobs, at) // both complete and commit while the sweep waits
	if deleted := release(); deleted != 0 {
		t.Errorf("the sweep deleted %d records whose results live", deleted)
	}
	for _, k := range []string{"compressed", "derived"} {
		r, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: k, Now: at})
		if err != nil || r.Status != idemtype.RecordCompleted || !r.ExpiresAt.Equal(at.Add(7*24*time.Hour)) {
			t.Errorf("%s: record of a result that lives 7 more days: %+v, %v", k, r, err)
		}
	}
}

// gatedSweep starts the expiry sweep at now (limit 100) held by a gate
// right after its snapshot (an advisory lock its first scan waits for, as a
// slow statement would wait), and returns once it waits there; release
// opens the gate, waits for the sweep and returns how many records it
// deleted.
func gatedSweep(t *testing.T, s *Store, now time.Time) (release func() int64) {
	t.Helper()
	ctx := t.Context()
	gate, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gate.Release)
	const lockKey = 434343
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	sweep := strings.Replace(s.sql(qDeleteExpiredRecords), "expires_at <= "+sweepNow,
		fmt.Sprintf("expires_at <= %s AND (SELECT 1 FROM pg_advisory_xact_lock_shared(%d::bigint)) = 1", sweepNow, lockKey), 1)
	if sweep == s.sql(qDeleteExpiredRecords) {
		t.Fatal("gate not inserted")
	}
	done := make(chan error, 1)
	var deleted int64
	go func() {
		tag, err := s.pool.Exec(ctx, sweep, now, 100, s.expiryClock(now))
		deleted = tag.RowsAffected()
		done <- err
	}()
	waitAdvisoryWaiter(t, s, lockKey)
	return func() int64 {
		t.Helper()
		if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return deleted
	}
}

// waitAdvisoryWaiter returns once a session waits for advisory lock key,
// within 30 s.
func waitAdvisoryWaiter(t *testing.T, s *Store, key int) {
	t.Helper()
	dbtest.UntilLocks(t, s.pool, true, nil, "nobody waited for the advisory lock", `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND objid = $1 AND NOT granted)`, key)
}

// TestExpiredRecordOfDeletedJob: a record in progress whose job row is gone
// (a cancelled job deleted by JobDelete) expires by its stored expiry: a
// job of the key that acquires it after that starts it afresh (then the
// sweep leaves it to its lease holder), and a reopening insert stamps its
// own creation time.
func TestExpiredRecordOfDeletedJob(t *testing.T) {
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	mk := func(runAt time.Time) *store.JobInsertParams {
		p := benchJob()
		p.Queue, p.RunAt, p.IdempotencyKey, p.Fingerprint = "rq", runAt, "K", "fp"
		p.DedupWindow, p.ResultTTL = time.Hour, 7*24*time.Hour
		return p
	}
	ins := func(p *store.JobInsertParams, at time.Time) *idemtype.JobRow {
		t.Helper()
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}, Now: at})
		if err != nil || res[0].Err != nil || res[0].Existing {
			t.Fatalf("insert: %v %+v", err, res)
		}
		return res[0].Job
	}
	cancelDelete := func(j *idemtype.JobRow, at time.Time) {
		t.Helper()
		if _, err := s.JobCancel(ctx, &store.JobCancelParams{ID: j.ID, Reason: "x", Now: at}); err != nil {
			t.Fatal(err)
		}
		if err := s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "default", ID: j.ID, State: idemtype.StateCancelled}); err != nil {
			t.Fatal(err)
		}
	}
	jx := ins(mk(now.Add(10*time.Hour)), now) // runs late, after its window
	t2 := now.Add(2 * time.Hour)
	cancelDelete(ins(mk(t2), t2), t2) // the key reopened for a job that is then deleted
	t10 := now.Add(10 * time.Hour)    // the record expired at t2 + 1 h
	res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "K",
		Owner: store.JobOwner(jx.ID), JobID: jx.ID, LeaseUntil: t10.Add(time.Minute), DedupUntil: t10,
		ExpiresAt: t10.Add(7 * 24 * time.Hour), Now: t10})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Record; !res.Acquired || r.JobID != jx.ID || !r.ExpiresAt.After(t10) || !r.CreatedAt.Equal(t10) {
		t.Errorf("acquire of an expired record whose job was deleted: acquired %v, %+v", res.Acquired, r)
	}
	if n, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: t10, Limit: 10}); err != nil || n != 0 {
		t.Errorf("the sweep deleted %d records (%v); the only one is live and leased", n, err)
	}

	// A reopening insert over a record whose job was deleted.
	p := mk(now)
	p.IdempotencyKey = "R"
	cancelDelete(ins(p, now), now)
	t3 := now.Add(3 * time.Hour)
	q := *p
	q.RunAt = t3
	ins(&q, t3)
	r, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "R", Now: t3})
	if err != nil || !r.CreatedAt.Equal(t3) {
		t.Errorf("reopened record: %+v, %v; want created at the reopen", r, err)
	}
}

// TestAcquireReleasedRecordBesideDerived: one acquire statement for a
// released Do record (no job, in progress, no lease) and for a key whose
// completion is derived: the Do record is taken, the derived key refused
// with its result (a NULL job id must not make the refusal of completed
// jobs' records unknown).
func TestAcquireReleasedRecordBesideDerived(t *testing.T) {
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	derivedFinish(t, s, derivedSetup(t, s, now, time.Hour), now.Add(time.Second))
	const doKey = "\x1fdo\x1fX"
	acq := func(key, owner string, at time.Time) *store.RecordAcquireParams {
		return &store.RecordAcquireParams{Tenant: "default", Key: key, Owner: owner, LeaseUntil: at.Add(time.Minute),
			DedupUntil: at, ExpiresAt: at.Add(24 * time.Hour), Now: at}
	}
	n := now.Add(2 * time.Second)
	if res, err := s.RecordAcquire(ctx, acq(doKey, "tokA", n)); err != nil || !res.Acquired {
		t.Fatalf("first acquire: %+v %v", res, err)
	}
	if err := s.RecordRelease(ctx, &store.RecordReleaseParams{Tenant: "default", Key: doKey, Owner: "tokA"}); err != nil {
		t.Fatal(err)
	}
	n = now.Add(3 * time.Second)
	res, err := s.RecordAcquireMany(ctx, []*store.RecordAcquireParams{acq("derived", "tokC", n), acq(doKey, "tokB", n)})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Acquired || res[0].Record.Status != idemtype.RecordCompleted {
		t.Errorf("derived key: %+v", res[0])
	}
	if !res[1].Acquired {
		t.Errorf("released Do record refused beside a derived completion: %+v", res[1].Record)
	}
}

// TestSweepNeverWaitsForJobLocks: the expiry sweep neither waits for a job
// row that an open transaction holds (a finish not yet committed) nor,
// meanwhile, blocks the heartbeats of the other jobs it looked at. Each
// call has 5 s; the sweep that locked jobs FOR SHARE without SKIP LOCKED
// waited for the transaction and held the heartbeat behind it.
func TestSweepNeverWaitsForJobLocks(t *testing.T) {
	s := newTestStore(t, 6)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	jobs := derivedSetup(t, s, now, time.Minute)
	lo, hi := jobs["compressed"], jobs["derived"]
	if lo.ID > hi.ID {
		lo, hi = hi, lo
	}
	at := now.Add(2 * time.Minute) // both windows passed, both jobs running
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	f := &store.JobFinishParams{ID: hi.ID, LeaseToken: hi.LeaseToken, State: idemtype.StateCompleted,
		Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(derivedResult), FinishedAt: at, DurationMS: 3,
		RecordResult: []byte(derivedResult), ResultHash: derivedHash()}
	if errs, err := s.JobFinishManyTx(ctx, tx, []*store.JobFinishParams{f}); err != nil || errs[0] != nil {
		t.Fatalf("finish in tx: %v %v", errs, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.RecordDeleteExpired(sctx, &store.RecordDeleteExpiredParams{Now: at, Limit: 10}); err != nil {
		t.Fatalf("sweep beside an open finish: %v", err)
	}
	hctx, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, err := s.JobHeartbeatMany(hctx, &store.JobHeartbeatParams{
		Leases: []store.Lease{{ID: lo.ID, Token: lo.LeaseToken}}, Until: at.Add(2 * time.Hour), Now: at}); err != nil {
		t.Errorf("heartbeat of job %d after the sweep: %v", lo.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The finish committed: the record of its job (derived, result live)
	// stays; the other job's expired record (its job still runs) went.
	if r, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: hi.IdempotencyKey, Now: at}); err != nil ||
		r.Status != idemtype.RecordCompleted {
		t.Errorf("record of the job finished beside the sweep: %+v, %v", r, err)
	}
}

// TestSweepLockedRecordTakesNoPlace: an expired record locked by another
// transaction does not take a place in the sweep's batch (the maintenance
// loop stops at the first batch that comes back short).
func TestSweepLockedRecordTakesNoPlace(t *testing.T) {
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i, k := range []string{"\x1fdo\x1fa", "\x1fdo\x1fb", "\x1fdo\x1fc"} {
		at := now.Add(time.Duration(i) * time.Second)
		if res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: k, Owner: "o",
			LeaseUntil: at.Add(time.Second), DedupUntil: at, ExpiresAt: at.Add(time.Minute), Now: at}); err != nil || !res.Acquired {
			t.Fatalf("acquire %q: %+v %v", k, res, err)
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, s.sql(`SELECT 1 FROM {schema}.records WHERE key = $1 FOR UPDATE`), "\x1fdo\x1fa"); err != nil {
		t.Fatal(err)
	}
	n, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: now.Add(time.Hour), Limit: 2})
	if err != nil || n != 2 {
		t.Errorf("sweep with limit 2, two free expired records and one locked: deleted %d, %v", n, err)
	}
}

// TestSweepRecordReopenedAfterItsSnapshot: the sweep's snapshot sees key
// K's record naming J1 (result expired). While the sweep is held after its
// snapshot, an inserter whose clock is 5 min behind the sweeper's reopens K
// for J2 (window 1 min), J2 runs and completes (derived: its result lives
// 1 h). The record's latest version names J2, absent from the sweep's
// snapshot: that is not a deleted job, and the record stays.
func TestSweepRecordReopenedAfterItsSnapshot(t *testing.T) {
	s := newTestStore(t, 6)
	ctx := t.Context()
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	mk := func(at time.Time, ttl time.Duration) *store.JobInsertParams {
		p := benchJob()
		p.Queue, p.RunAt, p.IdempotencyKey, p.Fingerprint = "rq", at, "K", "fp"
		p.DedupWindow, p.ResultTTL = time.Minute, ttl
		return p
	}
	run := func(at time.Time, ttl time.Duration) int64 {
		t.Helper()
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{mk(at, ttl)}, Now: at})
		if err != nil || res[0].Err != nil || res[0].Existing {
			t.Fatalf("insert: %v %+v", err, res)
		}
		jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"rq"}, WorkerID: "w", Limit: 1,
			LeaseUntil: at.Add(time.Hour), Now: at})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %d %v", len(jobs), err)
		}
		j := jobs[0]
		f := &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(derivedResult), FinishedAt: at.Add(time.Second),
			DurationMS: 3, RecordResult: []byte(derivedResult), ResultHash: derivedHash()}
		if errs, err := s.JobFinishMany(ctx, []*store.JobFinishParams{f}); err != nil || errs[0] != nil {
			t.Fatalf("finish: %v %v", errs, err)
		}
		return j.ID
	}
	run(t0, time.Minute) // J1: derived, result expires at t0+61s
	T := t0.Add(10 * time.Minute)

	release := gatedSweep(t, s, T)
	j2 := run(t0.Add(5*time.Minute), time.Hour) // J2: window ends t0+6m, result lives to t0+65m+1s
	if r, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "K", Now: T}); err != nil ||
		r.Status != idemtype.RecordCompleted || r.ResultJobID != j2 {
		t.Fatalf("before the sweep: %+v %v", r, err)
	}
	deleted := release()
	if r, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "K", Now: T}); err != nil || deleted != 0 {
		t.Errorf("the sweep deleted %d records; the record whose derived result lives until T+55m: %+v, %v", deleted, r, err)
	}
}
