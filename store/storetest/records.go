package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
)
import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func recordCases() []testCase {
	return []testCase{
		{"Records/job_key_record_in_progress_after_insert", testRecordAfterInsert},
		{"Records/completed_finish_caches_result", testRecordCompletedFinish},
		{"Records/cached_finish_keeps_original_result", testRecordCachedFinish},
		{"Records/failures_never_cached", testRecordFailureNotCached},
		{"Records/job_heartbeat_extends_record_lease", testRecordHeartbeat},
		{"RecordAcquire/new_record", testAcquireNew},
		{"RecordAcquire/held_by_live_lease", testAcquireHeld},
		{"RecordAcquire/expired_lease_taken_over", testAcquireExpiredLease},
		{"RecordAcquire/same_owner_reacquires", testAcquireSameOwner},
		{"RecordAcquire/completed_returns_cached_result", testAcquireCompleted},
		{"RecordAcquireMany/each_item_as_alone_in_order", testAcquireMany},
		{"RecordAcquireMany/distinct_keys_as_alone", testAcquireManyDistinct},
		{"RecordAcquireMany/opposite_key_orders_at_once", testAcquireManyOppositeOrders},
		{"RecordAcquire/expired_record_starts_fresh", testAcquireExpiredRecord},
		{"RecordAcquire/job_takes_lease_of_its_key", testAcquireJobRecord},
		{"RecordComplete/stores_result", testRecordComplete},
		{"RecordComplete/wrong_owner_lease_lost", testRecordCompleteWrongOwner},
		{"RecordRelease/clears_own_lease_only", testRecordRelease},
		{"RecordRenew/extends_only_a_lease_its_owner_holds", testRecordRenew},
		{"Race/renewals_after_release_never_take_the_key", testRaceRenewAfterRelease},
		{"RecordDelete/deletes_and_not_found", testRecordDelete},
		{"RecordGet/expired_or_other_tenant_not_found", testRecordGetExpired},
		{"RecordStats/counts", testRecordStats},
		{"Records/lease_takeover_complete_expire", testRecordLease},
		{"Records/cached_result_kept_after_window_zero_reopen", testResultKeptWindowZero},
		{"Records/reopen_expiry_is_max_of_window_and_result", testReopenExpiry},
		{"Records/completion_reads_alike_everywhere_and_outlives_its_job", testCompletionEveryReader},
		{"Records/made_by_an_acquire_after_the_completion_holds_no_result", testRecordMadeAfterCompletion},
		{"Records/key_of_a_deleted_job_makes_a_new_job", testKeyOfDeletedJob},
	}
}

// acquire runs RecordAcquire and fails on an error.
func acquire(t *testing.T, s store.Store, p *store.RecordAcquireParams) *store.RecordAcquireResult {
	t.Helper()
	r, err := s.RecordAcquire(t.Context(), p)
	if err != nil {
		t.Fatalf("RecordAcquire(%s, owner %s): %v", p.Key, p.Owner, err)
	}
	if r == nil || r.Record == nil {
		t.Fatalf("RecordAcquire(%s, owner %s): no record in the result", p.Key, p.Owner)
	}
	return r
}

// acq returns acquire params for key by owner at now with a lease of one
// minute, a dedup window of one hour and an expiry of a day.
func acq(key, owner string, now time.Time) *store.RecordAcquireParams {
	return &store.RecordAcquireParams{Tenant: "default", Key: key, Owner: owner, LeaseUntil: now.Add(time.Minute),
		DedupUntil: now.Add(time.Hour), ExpiresAt: now.Add(24 * time.Hour), Now: now}
}

// complete runs RecordComplete for owner with result and a TTL of two days.
func complete(t *testing.T, s store.Store, key, owner, result string, now time.Time) error {
	t.Helper()
	return s.RecordComplete(t.Context(), &store.RecordCompleteParams{Tenant: "default", Key: key, Owner: owner,
		Result: []byte(result), ResultHash: hash(result), TTL: 48 * time.Hour, DurationMS: 12, Now: now})
}

func testRecordAfterInsert(t *testing.T, s store.Store) {
	p := keyed("k", "K", "fp")
	j := insert1(t, s, at(0), p)
	for _, r := range []*idemtype.Record{record(t, s, "default", "K", at(0)), record(t, s, "", "K", at(0))} {
		if r.Tenant != "default" || r.Key != "K" || r.Status != idemtype.RecordInProgress || r.JobID != j.ID ||
			r.Fingerprint != p.Fingerprint || r.ResultJobID != 0 || r.Result != nil || r.ResultHash != "" ||
			r.SizeBytes != 0 || r.Compressed || r.LeaseOwner != "" {
			t.Errorf("record after insert: %+v", r)
		}
		wantTime(t, "CreatedAt", r.CreatedAt, at(0))
		wantTimeP(t, "DedupUntil", r.DedupUntil, at(time.Hour))
		wantNil(t, "CompletedAt", r.CompletedAt)
		if r.ExpiresAt != nil && r.ExpiresAt.Before(at(time.Hour)) {
			t.Errorf("ExpiresAt %v before DedupUntil", r.ExpiresAt)
		}
	}
}

func testRecordCompletedFinish(t *testing.T, s store.Store) {
	long := keyed("k2", "L", "fp")
	long.DedupWindow = 48 * time.Hour
	long.ResultTTL = time.Hour
	comp := keyed("k3", "C", "fp")
	js := insertNew(t, s, at(0), keyed("k1", "K", "fp"), long, comp)
	fin := at(time.Minute + time.Second)

	c0 := claimJob(t, s, js[0], at(time.Minute))
	if res := acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: store.JobOwner(c0.ID),
		JobID: c0.ID, LeaseUntil: at(time.Hour), Now: at(time.Minute)}); !res.Acquired {
		t.Fatalf("job could not take its key's lease")
	}
	finish1(t, s, completion(c0, `{"v":"hello"}`, fin))
	r := record(t, s, "default", "K", fin)
	if r.Status != idemtype.RecordCompleted || string(r.Result) != `{"v":"hello"}` || r.ResultHash != hash(`{"v":"hello"}`) ||
		r.SizeBytes != int64(len(`{"v":"hello"}`)) || r.Compressed || r.ResultJobID != js[0].ID || r.JobID != js[0].ID ||
		r.LeaseOwner != "" {
		t.Errorf("record after completion: %+v", r)
	}
	wantTimeP(t, "CompletedAt", r.CompletedAt, fin)
	wantTimeP(t, "ExpiresAt = FinishedAt + ResultTTL", r.ExpiresAt, fin.Add(24*time.Hour))
	wantTimeP(t, "DedupUntil", r.DedupUntil, at(time.Hour))
	wantNil(t, "LeaseUntil", r.LeaseUntil)

	completeJob(t, s, js[1], at(time.Minute), `2`)
	wantTimeP(t, "ExpiresAt = DedupUntil", record(t, s, "default", "L", fin).ExpiresAt, at(48*time.Hour))

	c := claimJob(t, s, js[2], at(time.Minute))
	p := completion(c, `"big"`, fin)
	p.RecordResult = []byte{0x1f, 0x8b, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	p.RecordCompressed = true
	p.ResultHash = hash(`"big"`)
	finish1(t, s, p)
	r = record(t, s, "default", "C", fin)
	if r.Status != idemtype.RecordCompleted || !r.Compressed || r.SizeBytes != 11 || r.ResultHash != hash(`"big"`) {
		t.Errorf("compressed record: status %s compressed %v size %d hash %s", r.Status, r.Compressed, r.SizeBytes, r.ResultHash)
	}
	wantJSON(t, "job Result", mustGet(t, s, js[2].ID).Result, `"big"`)
}

func testRecordCachedFinish(t *testing.T, s store.Store) {
	j1 := insert1(t, s, at(0), keyed("k", "K", "fp"))
	completeJob(t, s, j1, at(time.Minute), `"first"`)
	j2 := insert1(t, s, at(2*time.Hour), keyed("k", "K", "fp"))
	c := claimJob(t, s, j2, at(2*time.Hour))
	p := completion(c, `"first"`, at(2*time.Hour+time.Second))
	p.WasCached, p.OriginalJobID, p.Outcome = true, j1.ID, idemtype.OutcomeCached
	finish1(t, s, p)
	got := wantState(t, s, j2.ID, idemtype.StateCompleted)
	if !got.WasCached || got.OriginalJobID != j1.ID {
		t.Errorf("WasCached %v OriginalJobID %d", got.WasCached, got.OriginalJobID)
	}
	r := record(t, s, "default", "K", at(2*time.Hour+time.Second))
	if r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID || string(r.Result) != `"first"` || r.JobID != j2.ID {
		t.Errorf("record after a cached finish: status %s result job %d result %s job %d", r.Status, r.ResultJobID, r.Result, r.JobID)
	}
	wantTimeP(t, "CompletedAt unchanged", r.CompletedAt, at(time.Minute+time.Second))
}

func testRecordFailureNotCached(t *testing.T, s store.Store) {
	p := keyed("k", "K", "fp")
	p.DedupWindow = 24 * time.Hour
	j := insert1(t, s, at(0), p)
	for i, st := range []idemtype.JobState{idemtype.StateRetryable, idemtype.StateDead} {
		now := at(time.Duration(i) * time.Hour)
		c := claimJob(t, s, j, now)
		res := acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: store.JobOwner(j.ID),
			JobID: j.ID, LeaseUntil: now.Add(lease), Now: now})
		if !res.Acquired {
			t.Fatalf("job %d could not take the lease of its own key: %+v", j.ID, res.Record)
		}
		finish1(t, s, failure(c, st, idemtype.OutcomeFailed, "boom", now.Add(time.Hour), now.Add(time.Second)))
		r := record(t, s, "default", "K", now.Add(time.Second))
		wantStatus := idemtype.RecordInProgress
		if st == idemtype.StateDead {
			wantStatus = idemtype.RecordFailed
		}
		if r.Status != wantStatus || r.Result != nil || r.ResultJobID != 0 || r.LeaseOwner != "" {
			t.Errorf("record after a %s finish: status %s result %s result job %d lease owner %q", st, r.Status, r.Result, r.ResultJobID, r.LeaseOwner)
		}
		if r.JobID != j.ID {
			t.Errorf("record job %d, want %d", r.JobID, j.ID)
		}
	}
	// The lease is free: another owner may take it at once.
	if res := acquire(t, s, acq("K", "other", at(time.Hour+2*time.Second))); !res.Acquired {
		t.Errorf("lease not free after failures: %+v", res.Record)
	}
}

func testRecordHeartbeat(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), keyed("k1", "K1", "fp"), keyed("k2", "K2", "fp"))
	// K2's lease is held by someone else (a Do call) before its job runs
	// (once it runs, its job holds it).
	if res := acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K2", Owner: "someone",
		LeaseUntil: at(time.Minute), Now: at(0)}); !res.Acquired {
		t.Fatalf("could not take K2's lease")
	}
	c1 := claimJob(t, s, js[0], at(0))
	c2 := claimJob(t, s, js[1], at(0))
	if res := acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K1", Owner: store.JobOwner(c1.ID),
		JobID: c1.ID, LeaseUntil: at(time.Minute), Now: at(0)}); !res.Acquired {
		t.Fatalf("job could not take its key's lease")
	}
	errs := heartbeat(t, s, at(10*time.Minute), at(30*time.Second), leaseOf(c1), leaseOf(c2))
	wantOK(t, "heartbeat 1", errs[0])
	wantOK(t, "heartbeat 2", errs[1])
	r1 := record(t, s, "default", "K1", at(30*time.Second))
	if r1.LeaseOwner != store.JobOwner(c1.ID) {
		t.Errorf("K1 lease owner %q", r1.LeaseOwner)
	}
	wantTimeP(t, "K1 LeaseUntil after heartbeat", r1.LeaseUntil, at(10*time.Minute))
	r2 := record(t, s, "default", "K2", at(30*time.Second))
	if r2.LeaseOwner != "someone" {
		t.Errorf("K2 lease owner %q, want someone", r2.LeaseOwner)
	}
	wantTimeP(t, "K2 LeaseUntil (not the job's)", r2.LeaseUntil, at(time.Minute))
}

func testAcquireNew(t *testing.T, s store.Store) {
	p := acq("K", "o1", at(0))
	p.JobID = 77
	res := acquire(t, s, p)
	if !res.Acquired {
		t.Fatalf("not acquired: %+v", res.Record)
	}
	for _, r := range []*idemtype.Record{res.Record, record(t, s, "default", "K", at(0))} {
		if r.Tenant != "default" || r.Key != "K" || r.Status != idemtype.RecordInProgress || r.LeaseOwner != "o1" || r.JobID != 77 {
			t.Errorf("new record: %+v", r)
		}
		wantTimeP(t, "LeaseUntil", r.LeaseUntil, at(time.Minute))
		wantTimeP(t, "DedupUntil", r.DedupUntil, at(time.Hour))
		wantTimeP(t, "ExpiresAt", r.ExpiresAt, at(24*time.Hour))
		wantTime(t, "CreatedAt", r.CreatedAt, at(0))
	}
}

func testAcquireHeld(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	res := acquire(t, s, acq("K", "o2", at(59*time.Second)))
	if res.Acquired {
		t.Fatalf("acquired a key held by a live lease")
	}
	if res.Record.LeaseOwner != "o1" || res.Record.Status != idemtype.RecordInProgress {
		t.Errorf("record shows owner %q status %s, want o1 in_progress", res.Record.LeaseOwner, res.Record.Status)
	}
	wantTimeP(t, "holder's LeaseUntil", res.Record.LeaseUntil, at(time.Minute))
	if r := record(t, s, "default", "K", at(time.Minute)); r.LeaseOwner != "o1" {
		t.Errorf("a refused acquire changed the owner to %q", r.LeaseOwner)
	}
}

func testAcquireExpiredLease(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	res := acquire(t, s, acq("K", "o2", at(time.Minute)))
	if !res.Acquired || res.Record.LeaseOwner != "o2" {
		t.Fatalf("expired lease not taken over: acquired %v owner %q", res.Acquired, res.Record.LeaseOwner)
	}
	wantTimeP(t, "new LeaseUntil", res.Record.LeaseUntil, at(2*time.Minute))
	if err := complete(t, s, "K", "o1", "x", at(time.Minute)); err == nil {
		t.Errorf("the old owner completed after a takeover")
	} else {
		wantErr(t, "old owner completes", err, idemtype.ErrLeaseLost)
	}
}

func testAcquireSameOwner(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	res := acquire(t, s, acq("K", "o1", at(30*time.Second)))
	if !res.Acquired || res.Record.LeaseOwner != "o1" {
		t.Fatalf("owner could not re-acquire: %v %q", res.Acquired, res.Record.LeaseOwner)
	}
	wantTimeP(t, "LeaseUntil after re-acquire", record(t, s, "default", "K", at(30*time.Second)).LeaseUntil, at(90*time.Second))
	// A released lease is free for anyone.
	wantOK(t, "release", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "K", Owner: "o1"}))
	if res := acquire(t, s, acq("K", "o2", at(40*time.Second))); !res.Acquired {
		t.Errorf("released lease not free")
	}
}

func testAcquireCompleted(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	wantOK(t, "complete", complete(t, s, "K", "o1", "result-bytes", at(10*time.Second)))
	for _, owner := range []string{"o2", "o1"} {
		res := acquire(t, s, acq("K", owner, at(time.Hour*2)))
		if res.Acquired {
			t.Errorf("%s acquired a completed key", owner)
		}
		r := res.Record
		if r.Status != idemtype.RecordCompleted || string(r.Result) != "result-bytes" || r.ResultHash != hash("result-bytes") {
			t.Errorf("cached record: status %s result %q hash %s", r.Status, r.Result, r.ResultHash)
		}
	}
}

func testAcquireExpiredRecord(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	wantOK(t, "complete", complete(t, s, "K", "o1", "old", at(time.Second)))
	// TTL 48h, dedup 1h: expired from at(1s+48h).
	later := at(time.Second + 48*time.Hour)
	_, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K", Now: later})
	wantErr(t, "RecordGet of an expired record", err, idemtype.ErrNotFound)
	res := acquire(t, s, acq("K", "o2", later))
	if !res.Acquired {
		t.Fatalf("expired record not replaced: %+v", res.Record)
	}
	r := record(t, s, "default", "K", later)
	if r.Status != idemtype.RecordInProgress || r.Result != nil || r.ResultJobID != 0 || r.LeaseOwner != "o2" || r.ResultHash != "" {
		t.Errorf("fresh record: %+v", r)
	}
	wantTime(t, "CreatedAt of the fresh record", r.CreatedAt, later)
	wantNil(t, "CompletedAt of the fresh record", r.CompletedAt)
	wantTimeP(t, "ExpiresAt of the fresh record", r.ExpiresAt, later.Add(24*time.Hour))
}

func testAcquireJobRecord(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), keyed("k", "K", "fp"))
	res := acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: store.JobOwner(j.ID), JobID: j.ID,
		LeaseUntil: at(time.Minute), DedupUntil: at(5 * time.Hour), ExpiresAt: at(9 * time.Hour), Now: at(0)})
	if !res.Acquired {
		t.Fatalf("job could not take the lease of the record its insert created: %+v", res.Record)
	}
	r := res.Record
	if r.JobID != j.ID || r.LeaseOwner != store.JobOwner(j.ID) || r.Fingerprint != hash("fp") {
		t.Errorf("record: %+v", r)
	}
	wantTimeP(t, "DedupUntil (kept from the insert)", r.DedupUntil, at(time.Hour))
	// The job is not running, so no job lease holds the record for it: the
	// lease it asked for is written.
	wantHolder(t, "stored lease", record(t, s, "default", "K", at(0)), store.JobOwner(j.ID), at(time.Minute))
}

func testRecordComplete(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	err := s.RecordComplete(t.Context(), &store.RecordCompleteParams{Tenant: "default", Key: "K", Owner: "o1",
		Result: []byte("abc"), ResultHash: hash("abc"), TTL: 2 * time.Hour, DurationMS: 1234, Now: at(10 * time.Second)})
	wantOK(t, "RecordComplete", err)
	r := record(t, s, "default", "K", at(10*time.Second))
	if r.Status != idemtype.RecordCompleted || string(r.Result) != "abc" || r.ResultHash != hash("abc") || r.SizeBytes != 3 ||
		r.Compressed || r.DurationMS != 1234 || r.LeaseOwner != "" {
		t.Errorf("completed record: %+v", r)
	}
	wantNil(t, "LeaseUntil", r.LeaseUntil)
	wantTimeP(t, "CompletedAt", r.CompletedAt, at(10*time.Second))
	wantTimeP(t, "ExpiresAt = Now + TTL", r.ExpiresAt, at(2*time.Hour+10*time.Second))

	// ExpiresAt never before DedupUntil; compressed results keep the flag.
	p := acq("L", "o1", at(0))
	p.DedupUntil = at(72 * time.Hour)
	acquire(t, s, p)
	err = s.RecordComplete(t.Context(), &store.RecordCompleteParams{Tenant: "default", Key: "L", Owner: "o1",
		Result: []byte{0x1f, 0x8b, 9, 9}, Compressed: true, ResultHash: hash("x"), TTL: time.Hour, Now: at(time.Second)})
	wantOK(t, "RecordComplete (compressed)", err)
	r = record(t, s, "default", "L", at(time.Second))
	wantTimeP(t, "ExpiresAt = DedupUntil", r.ExpiresAt, at(72*time.Hour))
	if !r.Compressed || r.SizeBytes != 4 {
		t.Errorf("compressed %v size %d, want true 4", r.Compressed, r.SizeBytes)
	}
}

func testRecordCompleteWrongOwner(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	wantErr(t, "complete by another owner", complete(t, s, "K", "o2", "x", at(time.Second)), idemtype.ErrLeaseLost)
	if r := record(t, s, "default", "K", at(time.Second)); r.Status != idemtype.RecordInProgress || r.LeaseOwner != "o1" {
		t.Errorf("record after a refused complete: status %s owner %q", r.Status, r.LeaseOwner)
	}
	wantOK(t, "release", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "K", Owner: "o1"}))
	wantErr(t, "complete after release", complete(t, s, "K", "o1", "x", at(2*time.Second)), idemtype.ErrLeaseLost)
	err := complete(t, s, "missing", "o1", "x", at(time.Second))
	if err == nil {
		t.Errorf("completed a key that has no record")
	}
}

func testRecordRelease(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	wantOK(t, "release by another owner", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "K", Owner: "o2"}))
	r := record(t, s, "default", "K", at(time.Second))
	if r.LeaseOwner != "o1" {
		t.Errorf("release by another owner cleared the lease (owner %q)", r.LeaseOwner)
	}
	wantOK(t, "release", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "K", Owner: "o1"}))
	r = record(t, s, "default", "K", at(time.Second))
	if r.LeaseOwner != "" || r.Status != idemtype.RecordInProgress || r.Result != nil {
		t.Errorf("after release: owner %q status %s result %q", r.LeaseOwner, r.Status, r.Result)
	}
	wantOK(t, "release of a missing key", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "missing", Owner: "o1"}))
}

// renew runs RecordRenew of key for owner at now, to until.
func renew(t *testing.T, s store.Store, key, owner string, until, now time.Time) error {
	t.Helper()
	return s.RecordRenew(t.Context(), &store.RecordRenewParams{Tenant: "default", Key: key, Owner: owner,
		LeaseUntil: until, Now: now})
}

// testRecordRenew: a renewal moves the lease end of the owner that holds
// the key (lapsed or not, while nobody took it), and is ErrLeaseLost —
// writing nothing — once the lease was released, completed or taken over,
// or for an expired or missing record: it never takes a free key.
func testRecordRenew(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0))) // lease until at(1m)
	wantOK(t, "renew by the holder", renew(t, s, "K", "o1", at(5*time.Minute), at(30*time.Second)))
	wantHolder(t, "after renew", record(t, s, "default", "K", at(time.Minute)), "o1", at(5*time.Minute))
	wantErr(t, "renew by another owner", renew(t, s, "K", "o2", at(9*time.Minute), at(time.Minute)), idemtype.ErrLeaseLost)
	wantHolder(t, "after another owner's renew", record(t, s, "default", "K", at(time.Minute)), "o1", at(5*time.Minute))
	// Lapsed but not taken: the holder may still renew.
	wantOK(t, "renew of a lapsed lease", renew(t, s, "K", "o1", at(7*time.Minute), at(6*time.Minute)))

	// Released: a late renewal is lost and leaves the key free.
	wantOK(t, "release", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "K", Owner: "o1"}))
	wantErr(t, "renew after release", renew(t, s, "K", "o1", at(9*time.Minute), at(6*time.Minute)), idemtype.ErrLeaseLost)
	if r := record(t, s, "default", "K", at(6*time.Minute)); r.LeaseOwner != "" {
		t.Errorf("renew after release: the key is held by %q until %v", r.LeaseOwner, r.LeaseUntil)
	}
	if res := acquire(t, s, acq("K", "o2", at(6*time.Minute))); !res.Acquired {
		t.Errorf("acquire after release and a late renew: not acquired, holder %q", res.Record.LeaseOwner)
	}

	// Taken over: o1's renewal is lost, o2 keeps the key.
	wantErr(t, "renew after takeover", renew(t, s, "K", "o1", at(20*time.Minute), at(6*time.Minute)), idemtype.ErrLeaseLost)
	wantHolder(t, "after the old owner's renew", record(t, s, "default", "K", at(6*time.Minute)), "o2", at(7*time.Minute))

	// Completed: nothing left to renew.
	wantOK(t, "complete", complete(t, s, "K", "o2", `"r"`, at(6*time.Minute)))
	wantErr(t, "renew after completion", renew(t, s, "K", "o2", at(20*time.Minute), at(7*time.Minute)), idemtype.ErrLeaseLost)
	if r := record(t, s, "default", "K", at(7*time.Minute)); r.Status != idemtype.RecordCompleted || r.LeaseOwner != "" {
		t.Errorf("after a renew of a completed record: status %s owner %q", r.Status, r.LeaseOwner)
	}

	// Expired record (acq: expires at 24h after its acquire) and missing key.
	acquire(t, s, acq("E", "o3", at(0)))
	wantErr(t, "renew of an expired record", renew(t, s, "E", "o3", at(25*time.Hour), at(24*time.Hour)), idemtype.ErrLeaseLost)
	wantErr(t, "renew of a missing key", renew(t, s, "missing", "o3", at(time.Hour), at(0)), idemtype.ErrLeaseLost)
	if _, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "missing", Now: at(0)}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Errorf("renew of a missing key made a record: %v", err)
	}
}

// testRaceRenewAfterRelease: owners race for one key, each holding it for
// a few renewals, releasing it, then renewing once more (a renew loop
// racing its own release). No late renewal may succeed, and no two owners
// may hold the key at once.
func testRaceRenewAfterRelease(t *testing.T, s store.Store) {
	const owners, rounds = 8, 15
	var holder atomic.Int32 // owner+1 while held, 0 when free
	var wg sync.WaitGroup
	errc := make(chan error, owners*rounds)
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("o%d", o)
			for range rounds {
				now := at(0)
				res, err := s.RecordAcquire(t.Context(), acq("K", owner, now))
				if err != nil {
					errc <- err
					return
				}
				if !res.Acquired {
					continue
				}
				if !holder.CompareAndSwap(0, int32(o+1)) {
					errc <- fmt.Errorf("%s acquired the key while owner %d held it", owner, holder.Load()-1)
					return
				}
				for range 2 {
					if err := s.RecordRenew(t.Context(), &store.RecordRenewParams{Tenant: "default", Key: "K",
						Owner: owner, LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
						errc <- fmt.Errorf("%s renewing its own lease: %w", owner, err)
						return
					}
				}
				holder.Store(0)
				if err := s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "K", Owner: owner}); err != nil {
					errc <- err
					return
				}
				err = s.RecordRenew(t.Context(), &store.RecordRenewParams{Tenant: "default", Key: "K",
					Owner: owner, LeaseUntil: now.Add(time.Minute), Now: now})
				if !errors.Is(err, idemtype.ErrLeaseLost) {
					errc <- fmt.Errorf("%s renewed after its release: %v", owner, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

func testRecordDelete(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0)))
	wantErr(t, "delete in another tenant", s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "other", Key: "K"}), idemtype.ErrNotFound)
	wantErr(t, "delete of a missing key", s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "default", Key: "missing"}), idemtype.ErrNotFound)
	// At the end of o1's lease (at(1m)): a live lease refuses the delete
	// (testRecordDeleteStoredLease).
	wantOK(t, "delete", s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "default", Key: "K", Now: at(time.Minute)}))
	_, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K", Now: at(0)})
	wantErr(t, "get after delete", err, idemtype.ErrNotFound)
	if res := acquire(t, s, acq("K", "o2", at(time.Second))); !res.Acquired {
		t.Errorf("deleted key not free")
	}
}

func testRecordGetExpired(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0))) // expires at(24h)
	record(t, s, "default", "K", at(24*time.Hour-time.Microsecond))
	_, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K", Now: at(24 * time.Hour)})
	wantErr(t, "RecordGet at ExpiresAt", err, idemtype.ErrNotFound)
	_, err = s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "other", Key: "K", Now: at(0)})
	wantErr(t, "RecordGet of another tenant", err, idemtype.ErrNotFound)
	_, err = s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "missing", Now: at(0)})
	wantErr(t, "RecordGet of a missing key", err, idemtype.ErrNotFound)
}

func testRecordStats(t *testing.T, s store.Store) {
	mk := func(tenant, key string, expires time.Duration) {
		p := acq(key, "o", at(0))
		p.Tenant = tenant
		p.ExpiresAt = at(expires)
		p.DedupUntil = at(time.Minute)
		acquire(t, s, p)
	}
	mk("a", "live-long", 72*time.Hour) // live, in progress
	mk("a", "expiring", 30*time.Hour)  // live, expires within 24 h of at(10h)
	mk("a", "done", 72*time.Hour)      // completed below
	mk("a", "expired1", 5*time.Hour)   // expired at at(10h)
	mk("b", "expired2", 6*time.Hour)   // expired, tenant b
	mk("b", "live-b", 100*time.Hour)   // live, tenant b
	if err := s.RecordComplete(t.Context(), &store.RecordCompleteParams{Tenant: "a", Key: "done", Owner: "o",
		Result: []byte("12345"), ResultHash: hash("12345"), TTL: time.Hour, Now: at(time.Second)}); err != nil {
		t.Fatalf("RecordComplete: %v", err)
	}
	// "done" now expires at(1h+1s) — re-complete it on a fresh key to keep it live.
	mk("a", "done2", 72*time.Hour)
	if err := s.RecordComplete(t.Context(), &store.RecordCompleteParams{Tenant: "a", Key: "done2", Owner: "o",
		Result: []byte("1234567"), ResultHash: hash("1234567"), TTL: 70 * time.Hour, Now: at(time.Second)}); err != nil {
		t.Fatalf("RecordComplete: %v", err)
	}
	now := at(10 * time.Hour)
	check := func(tenant string, want store.RecordStats) {
		t.Helper()
		got, err := s.RecordStats(t.Context(), &store.RecordStatsParams{Tenant: tenant, Now: now})
		if err != nil {
			t.Fatalf("RecordStats(%q): %v", tenant, err)
		}
		if *got != want {
			t.Errorf("RecordStats(%q) = %+v, want %+v", tenant, *got, want)
		}
	}
	// Tenant a: live = live-long, expiring, done2; in progress = live-long,
	// expiring; expiring within 24h = expiring; expired = expired1, done.
	check("a", store.RecordStats{Entries: 3, InProgress: 2, Completed: 1, Expiring24h: 1, Expired: 2, SizeBytes: 7})
	check("b", store.RecordStats{Entries: 1, InProgress: 1, Expiring24h: 0, Expired: 1, SizeBytes: 0})
	check("", store.RecordStats{Entries: 4, InProgress: 3, Completed: 1, Expiring24h: 1, Expired: 3, SizeBytes: 7})
}

func testAcquireMany(t *testing.T, s store.Store) {
	acquire(t, s, acq("held", "o1", at(0)))
	acquire(t, s, acq("done", "o1", at(0)))
	wantOK(t, "complete", complete(t, s, "done", "o1", "cached", at(time.Second)))
	now := at(2 * time.Second)
	res, err := s.RecordAcquireMany(t.Context(), []*store.RecordAcquireParams{
		acq("new", "o2", now), acq("held", "o2", now), acq("done", "o2", now),
		acq("twice", "o3", now), acq("twice", "o4", now),
	})
	if err != nil || len(res) != 5 {
		t.Fatalf("RecordAcquireMany: %d results, %v", len(res), err)
	}
	want := []struct {
		acquired bool
		owner    string
		status   idemtype.RecordStatus
	}{{true, "o2", idemtype.RecordInProgress}, {false, "o1", idemtype.RecordInProgress},
		{false, "", idemtype.RecordCompleted}, {true, "o3", idemtype.RecordInProgress}, {false, "o3", idemtype.RecordInProgress}}
	for i, w := range want {
		r := res[i]
		if r.Acquired != w.acquired || r.Record.Status != w.status || (w.owner != "" && r.Record.LeaseOwner != w.owner) {
			t.Errorf("item %d: acquired %v status %s owner %q, want %v %s %q", i, r.Acquired, r.Record.Status, r.Record.LeaseOwner, w.acquired, w.status, w.owner)
		}
	}
	if string(res[2].Record.Result) != "cached" {
		t.Errorf("cached result %q", res[2].Record.Result)
	}
	if out, err := s.RecordAcquireMany(t.Context(), nil); err != nil || len(out) != 0 {
		t.Errorf("empty batch: %v %v", out, err)
	}
}

// testAcquireManyDistinct sets up two twin sets of keys in every state an
// acquire meets (new, held, lease lapsed, same owner, completed, expired
// record, another tenant's key) and acquires one set with one
// RecordAcquireMany of distinct keys (which a store may run as one
// statement) and the other key by key: every result must be the same.
func testAcquireManyDistinct(t *testing.T, s store.Store) {
	setup := func(prefix string) {
		k := func(name string) string { return prefix + name }
		acquire(t, s, acq(k("held"), "o1", at(time.Minute)))
		acquire(t, s, acq(k("lapsed"), "o1", at(0)))
		acquire(t, s, acq(k("mine"), "o2", at(time.Minute)))
		acquire(t, s, acq(k("done"), "o1", at(0)))
		wantOK(t, "complete", complete(t, s, k("done"), "o1", "cached", at(time.Second)))
		short := acq(k("expired"), "o1", at(0))
		short.DedupUntil, short.ExpiresAt = at(time.Second), at(2*time.Second)
		acquire(t, s, short)
		other := acq(k("tenant"), "o1", at(time.Minute))
		other.Tenant = "other"
		acquire(t, s, other)
	}
	setup("m-")
	setup("s-")
	now := at(90 * time.Second)
	names := []string{"tenant", "done", "new", "lapsed", "mine", "expired", "held"}
	var many []*store.RecordAcquireParams
	for _, n := range names {
		many = append(many, acq("m-"+n, "o2", now))
	}
	got, err := s.RecordAcquireMany(t.Context(), many)
	if err != nil || len(got) != len(names) {
		t.Fatalf("RecordAcquireMany: %d results, %v", len(got), err)
	}
	for i, n := range names {
		one := acquire(t, s, acq("s-"+n, "o2", now))
		m := got[i]
		if m.Acquired != one.Acquired {
			t.Errorf("%s: acquired %v in a batch, %v alone", n, m.Acquired, one.Acquired)
			continue
		}
		a, b := *m.Record, *one.Record
		a.Key, b.Key = n, n
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: batch %+v\nalone %+v", n, a, b)
		}
	}
	wantAcquired := map[string]bool{"tenant": true, "new": true, "lapsed": true, "mine": true, "expired": true}
	for i, n := range names {
		if got[i].Acquired != wantAcquired[n] {
			t.Errorf("%s: acquired %v, want %v", n, got[i].Acquired, wantAcquired[n])
		}
	}
}

func testRecordLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	acq := func(owner string, now time.Time) *store.RecordAcquireResult {
		t.Helper()
		r, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "k",
			Owner: owner, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := acq("a", base); !r.Acquired || r.Record.LeaseOwner != "a" {
		t.Fatalf("first acquire: %+v", r)
	}
	if r := acq("b", base.Add(time.Second)); r.Acquired || r.Record.LeaseOwner != "a" {
		t.Fatalf("second acquire: %+v", r)
	}
	// Expired lease: taken over.
	if r := acq("b", base.Add(2*time.Minute)); !r.Acquired || r.Record.LeaseOwner != "b" {
		t.Fatalf("takeover: %+v", r)
	}
	err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "default", Key: "k", Owner: "a",
		Result: []byte("r"), TTL: time.Hour, Now: base.Add(2 * time.Minute)})
	if !errors.Is(err, idemtype.ErrLeaseLost) {
		t.Fatalf("complete by old owner: %v", err)
	}
	now := base.Add(3 * time.Minute)
	if err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "default", Key: "k", Owner: "b",
		Result: []byte("r"), ResultHash: "h", TTL: 2 * time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "k", Now: now})
	if err != nil || rec.Status != idemtype.RecordCompleted || string(rec.Result) != "r" ||
		!rec.ExpiresAt.Equal(now.Add(2*time.Hour)) || rec.LeaseOwner != "" {
		t.Fatalf("record: %+v %v", rec, err)
	}
	if r := acq("c", now); r.Acquired || string(r.Record.Result) != "r" {
		t.Fatalf("acquire completed: %+v", r)
	}
	// Expired: gone for Get, and a new acquire starts afresh.
	later := now.Add(3 * time.Hour)
	if _, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "k", Now: later}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("expired get: %v", err)
	}
	if r := acq("d", later); !r.Acquired || r.Record.Status != idemtype.RecordInProgress || r.Record.Result != nil {
		t.Fatalf("acquire expired: %+v", r.Record)
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
	// unfinished (no stored expiry) and still holds job 1's result.
	j2 := insert1(t, s, at(time.Minute), zero("k2"))
	if j2.ID == j1.ID {
		t.Fatalf("no new job after the window-0 job finished")
	}
	r = record(t, s, "default", "K", at(time.Minute))
	if r.JobID != j2.ID || r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID {
		t.Errorf("reopened record: job %d status %s result job %d, want %d completed %d", r.JobID, r.Status, r.ResultJobID, j2.ID, j1.ID)
	}
	// Its expiry is projected from job 2 (available now): now + its TTL.
	wantTimeP(t, "ExpiresAt of a reopened window-0 record", r.ExpiresAt, at(time.Minute).Add(ttl))
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
	if _, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K", Now: done.Add(ttl)}); err == nil {
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

// testReopenExpiry: a record reopened after its window keeps its cached
// result until the result's own expiry (the TTL of the job that stored it),
// whatever the new job's result TTL, which is for the result that job may
// store: a shorter one does not drop it, a longer one does not extend it
// (it did until the twenty-sixth session, a rule from before migration
// 0023 stored a result's own expiry).
func testReopenExpiry(t *testing.T, s store.Store) {
	// Window 1 h, completed at at(1m+1s), reopened at at(2h).
	done := at(time.Minute + time.Second)
	for _, tc := range []struct {
		key        string
		ttl, ttl2  time.Duration // the result's TTL, the new job's
		want       time.Time     // ExpiresAt after the reopen at at(2h)
		wantResult bool
	}{
		{"LONG", 48 * time.Hour, time.Minute, done.Add(48 * time.Hour), true}, // the result outlives the window
		{"SHORT", time.Hour / 2, 96 * time.Hour, at(3 * time.Hour), false},    // the window outlives the result
	} {
		p1 := keyed("k1"+tc.key, tc.key, "fp")
		p1.ResultTTL = tc.ttl
		j1 := insert1(t, s, at(0), p1)
		completeJob(t, s, j1, at(time.Minute), `1`)
		p := keyed("k2"+tc.key, tc.key, "fp")
		p.ResultTTL = tc.ttl2
		j2 := insert1(t, s, at(2*time.Hour), p)
		r := record(t, s, "default", tc.key, at(2*time.Hour))
		if !tc.wantResult {
			if r.JobID != j2.ID || r.Status != idemtype.RecordInProgress {
				t.Errorf("%s: record job %d status %s, want %d in progress", tc.key, r.JobID, r.Status, j2.ID)
			}
			wantTimeP(t, tc.key+": DedupUntil after reopen", r.DedupUntil, at(3*time.Hour))
			wantTimeP(t, tc.key+": ExpiresAt after reopen", r.ExpiresAt, tc.want)
			continue
		}
		wantTimeP(t, tc.key+": ResultExpiresAt after reopen", r.ResultExpiresAt, done.Add(tc.ttl))
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

// testCompletionEveryReader: the completion of a keyed job (with a result,
// and with none: JSON null) reads alike through every reader — RecordGet,
// an acquire by another owner (refused, with the cached result),
// RecordStats — while the window is open and after it closed while the
// result lives; the expiry sweep, JobDelete of its job and retention leave
// it as it was until the result expires. PostgreSQL
// keeps such a completion in the job row only (pgstore's derivedJoin), so
// each of these readers derives it there.
func testCompletionEveryReader(t *testing.T, s store.Store) {
	ctx := t.Context()
	js := insertNew(t, s, at(0), keyed("k", "K", "fp"), keyed("k", "N", "fp")) // window 1 h, TTL 24 h
	fin := at(time.Minute + time.Second)
	finish1(t, s, completion(claimJob(t, s, js[0], at(time.Minute)), `{"v": [1, 2]}`, fin))
	none := completion(claimJob(t, s, js[1], at(time.Minute)), "", fin)
	none.Result, none.RecordResult, none.ResultHash = nil, []byte("null"), hash("null")
	finish1(t, s, none)

	want := map[string]*idemtype.Record{}
	for i, k := range []string{"K", "N"} {
		result := []string{`{"v": [1, 2]}`, "null"}[i]
		r := record(t, s, "default", k, fin)
		if r.Status != idemtype.RecordCompleted || string(r.Result) != result || r.ResultHash != hash(result) ||
			r.SizeBytes != int64(len(result)) || r.Compressed || r.ResultJobID != js[i].ID || r.JobID != js[i].ID ||
			r.LeaseOwner != "" || r.LeaseUntil != nil || r.DurationMS != 7 {
			t.Fatalf("record %s after its job completed: %+v", k, r)
		}
		wantTimeP(t, k+" CompletedAt", r.CompletedAt, fin)
		wantTimeP(t, k+" DedupUntil", r.DedupUntil, at(time.Hour))
		wantTimeP(t, k+" ExpiresAt = finish + TTL", r.ExpiresAt, fin.Add(24*time.Hour))
		want[k] = r
	}
	same := func(when string, now time.Time) {
		t.Helper()
		for k, w := range want {
			if r := record(t, s, "default", k, now); !reflect.DeepEqual(r, w) {
				t.Errorf("record %s %s:\n got %+v\nwant %+v", k, when, r, w)
			}
		}
	}
	late := at(2 * time.Hour) // the window closed, the results live
	same("after the window", late)

	for _, k := range []string{"K", "N"} {
		res := acquire(t, s, acq(k, "other", late))
		if res.Acquired || !reflect.DeepEqual(res.Record, want[k]) {
			t.Errorf("acquire of %s by another owner: acquired %v, record %+v", k, res.Acquired, res.Record)
		}
	}
	st, err := s.RecordStats(ctx, &store.RecordStatsParams{Now: late})
	if err != nil {
		t.Fatalf("RecordStats: %v", err)
	}
	if st.Entries != 2 || st.Completed != 2 || st.InProgress != 0 || st.Failed != 0 || st.Expired != 0 ||
		st.SizeBytes != int64(len(`{"v": [1, 2]}`)+len("null")) {
		t.Errorf("stats: %+v", *st)
	}
	if n, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: late, Limit: 100}); err != nil || n != 0 {
		t.Errorf("RecordDeleteExpired after the window: %d, %v; want 0 (the results live)", n, err)
	}
	same("after the expiry sweep", late)
	if err := s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "default", ID: js[0].ID, State: idemtype.StateCompleted}); err != nil {
		t.Fatalf("JobDelete: %v", err)
	}
	same("after JobDelete of K's job", late)
	deleteFinished(t, s, &store.JobDeleteFinishedParams{CompletedBefore: late, Limit: 100, Now: late}) // may take N's job
	same("after retention", late)

	gone := fin.Add(24 * time.Hour)
	for _, k := range []string{"K", "N"} {
		if _, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: k, Now: gone}); !errors.Is(err, idemtype.ErrNotFound) {
			t.Errorf("record %s once its result expired: %v, want ErrNotFound", k, err)
		}
	}
	if n, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: gone, Limit: 100}); err != nil || n != 2 {
		t.Errorf("RecordDeleteExpired once the results expired: %d, %v; want 2", n, err)
	}
}

// testRecordMadeAfterCompletion: a record that an acquire makes, after a
// job completed, naming that job (its stale attempt after RecordDelete of
// its key, or a job passing its id for another key) and that is then
// released is in progress with nothing cached: another owner takes it, and
// the stats count it in progress. (PostgreSQL derives a completion from a
// completed job's row only for the record the job's insert wrote.)
func testRecordMadeAfterCompletion(t *testing.T, s store.Store) {
	ctx := t.Context()
	js := insertNew(t, s, at(0), keyed("k", "K", "fp"), newJob("k"))
	fin := at(time.Minute)
	for i, j := range js {
		finish1(t, s, completion(claimJob(t, s, j, at(time.Second)), fmt.Sprintf(`{"job": %d}`, i), fin))
	}
	if err := s.RecordDelete(ctx, &store.RecordDeleteParams{Tenant: "default", Key: "K"}); err != nil {
		t.Fatal(err)
	}
	now := fin.Add(time.Second)
	for i, key := range []string{"K", "other"} {
		p := acq(key, store.JobOwner(js[i].ID), now)
		p.JobID = js[i].ID
		if res := acquire(t, s, p); !res.Acquired {
			t.Fatalf("acquire of %s by job %d: %+v", key, js[i].ID, res.Record)
		}
		if err := s.RecordRelease(ctx, &store.RecordReleaseParams{Tenant: "default", Key: key, Owner: p.Owner}); err != nil {
			t.Fatal(err)
		}
		if r := record(t, s, "default", key, now); r.Status != idemtype.RecordInProgress || r.Result != nil || r.ResultJobID != 0 {
			t.Errorf("%s after its acquire and release: %+v", key, r)
		}
	}
	st, err := s.RecordStats(ctx, &store.RecordStatsParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if st.InProgress != 2 || st.Completed != 0 || st.SizeBytes != 0 {
		t.Errorf("stats: %+v, want 2 in progress, none completed", *st)
	}
	for _, key := range []string{"K", "other"} {
		if res := acquire(t, s, acq(key, "do:other", now)); !res.Acquired {
			t.Errorf("%s refused to another owner: %+v", key, res.Record)
		}
	}
}
