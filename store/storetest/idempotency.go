package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func idempotencyCases() []testCase {
	return []testCase{
		{"JobInsertMany/key_repeated_returns_existing_in_every_state", testKeyExistingEveryState},
		{"JobInsertMany/key_reused_with_other_fingerprint", testKeyReused},
		{"JobInsertMany/keys_scoped_per_tenant", testKeyTenantScope},
		{"JobInsertMany/dedup_window_passed_creates_new_job", testDedupWindowPassed},
		{"JobInsertMany/dedup_window_zero_blocks_until_finished", testDedupWindowZero},
		{"JobInsertMany/duplicate_keys_in_one_batch", testKeyDuplicateInBatch},
		{"JobInsertMany/key_usable_after_record_delete", testKeyAfterRecordDelete},
		{"JobInsertMany/failed_item_leaves_no_record", testKeyFailedItem},
	}
}

// wantExisting checks an insert result returned job id as existing.
func wantExisting(t *testing.T, what string, r store.JobInsertResult, id int64, state idemtype.JobState) {
	t.Helper()
	if r.Err != nil {
		t.Errorf("%s: error %v, want existing job %d", what, r.Err, id)
		return
	}
	if !r.Existing || r.Job == nil || r.Job.ID != id {
		t.Errorf("%s: Existing %v job %v, want existing job %d", what, r.Existing, r.Job, id)
		return
	}
	if state != "" && r.Job.State != state {
		t.Errorf("%s: existing job state %s, want %s", what, r.Job.State, state)
	}
}

// wantKeyReused checks an insert result is a KeyReusedError for job id.
func wantKeyReused(t *testing.T, what string, r store.JobInsertResult, key string, id int64) {
	t.Helper()
	var kr *idemtype.KeyReusedError
	if !errors.As(r.Err, &kr) {
		t.Errorf("%s: error %v, want *idemtype.KeyReusedError", what, r.Err)
		return
	}
	if kr.JobID != id || kr.Key != key {
		t.Errorf("%s: KeyReusedError{Key %q, JobID %d}, want {%q, %d}", what, kr.Key, kr.JobID, key, id)
	}
	if !errors.Is(r.Err, idemtype.ErrKeyReused) {
		t.Errorf("%s: errors.Is(ErrKeyReused) false for %v", what, r.Err)
	}
	if r.Job != nil || r.Existing {
		t.Errorf("%s: Job %v Existing %v, want nil, false", what, r.Job, r.Existing)
	}
}

func testKeyExistingEveryState(t *testing.T, s store.Store) {
	now := at(0)
	mk := func(state idemtype.JobState) *idemtype.JobRow {
		p := keyed("k_"+string(state), "key-"+string(state), "fp")
		if state == idemtype.StateScheduled {
			p.RunAt = at(time.Hour * 24)
		}
		j := insert1(t, s, now, p)
		switch state {
		case idemtype.StateRunning:
			claimJob(t, s, j, now)
		case idemtype.StateRetryable:
			r := claimJob(t, s, j, now)
			finish1(t, s, failure(r, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Hour), now))
		case idemtype.StateCompleted:
			completeJob(t, s, j, now, `"ok"`)
		case idemtype.StateDead:
			killJob(t, s, j, now)
		case idemtype.StateCancelled:
			cancelJob(t, s, j, now)
		}
		return j
	}
	states := []idemtype.JobState{idemtype.StateAvailable, idemtype.StateScheduled, idemtype.StateRunning,
		idemtype.StateRetryable, idemtype.StateCompleted, idemtype.StateDead, idemtype.StateCancelled}
	for _, st := range states {
		j := mk(st)
		wantState(t, s, j.ID, st)
		res := insertAll(t, s, at(30*time.Minute), keyed("again", "key-"+string(st), "fp"))
		wantExisting(t, "repeat of key in state "+string(st), res[0], j.ID, st)
		if res[0].Job != nil && (res[0].Job.Kind != j.Kind || res[0].Job.IdempotencyKey != j.IdempotencyKey) {
			t.Errorf("existing job in state %s: kind %q key %q, want the stored job's %q %q",
				st, res[0].Job.Kind, res[0].Job.IdempotencyKey, j.Kind, j.IdempotencyKey)
		}
	}
	if n := len(listAll(t, s, store.JobFilter{Kind: "again"})); n != 0 {
		t.Errorf("%d jobs created by repeats, want 0", n)
	}
}

func testKeyReused(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), keyed("k", "K", "one"))
	res := insertAll(t, s, at(time.Minute), keyed("k", "K", "two"))
	wantKeyReused(t, "other fingerprint", res[0], "K", j.ID)
	// Still reused once the job completed, within the window.
	completeJob(t, s, j, at(time.Minute), `1`)
	res = insertAll(t, s, at(2*time.Minute), keyed("k", "K", "two"))
	wantKeyReused(t, "other fingerprint after completion", res[0], "K", j.ID)
	if n := len(listAll(t, s, store.JobFilter{})); n != 1 {
		t.Errorf("%d jobs, want 1", n)
	}
}

func testKeyTenantScope(t *testing.T, s store.Store) {
	a := keyed("k", "K", "one")
	a.Tenant = "a"
	b := keyed("k", "K", "two")
	b.Tenant = "b"
	ja := insert1(t, s, at(0), a)
	jb := insert1(t, s, at(0), b)
	if ja.ID == jb.ID {
		t.Fatalf("tenants a and b share job %d", ja.ID)
	}
	res := insertAll(t, s, at(time.Minute), b, a)
	wantExisting(t, "repeat in tenant b", res[0], jb.ID, idemtype.StateAvailable)
	wantExisting(t, "repeat in tenant a", res[1], ja.ID, idemtype.StateAvailable)
	if r := record(t, s, "b", "K", at(0)); r.JobID != jb.ID || r.Fingerprint != b.Fingerprint || r.Tenant != "b" {
		t.Errorf("record of tenant b: job %d fingerprint %s tenant %s", r.JobID, r.Fingerprint, r.Tenant)
	}
	_, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "c", Key: "K", Now: at(0)})
	wantErr(t, "RecordGet(other tenant)", err, idemtype.ErrNotFound)
}

func testDedupWindowPassed(t *testing.T, s store.Store) {
	// Window 1 h, TTL 24 h: after the window, a new job is created and the
	// completed result stays cached.
	j1 := insert1(t, s, at(0), keyed("k", "K", "fp"))
	completeJob(t, s, j1, at(time.Minute), `{"v":1}`)
	wantExisting(t, "within the window", insertAll(t, s, at(59*time.Minute), keyed("k", "K", "fp"))[0], j1.ID, idemtype.StateCompleted)

	now := at(2 * time.Hour)
	j2 := insert1(t, s, now, keyed("k", "K", "fp"))
	if j2.ID == j1.ID {
		t.Fatalf("no new job after the window")
	}
	if j2.State != idemtype.StateAvailable || j2.IdempotencyKey != "K" {
		t.Errorf("new job: state %s key %q", j2.State, j2.IdempotencyKey)
	}
	r := record(t, s, "default", "K", now)
	if r.JobID != j2.ID || r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID || string(r.Result) != `{"v":1}` {
		t.Errorf("record after the window: job %d status %s result job %d result %s; want job %d, completed, result job %d",
			r.JobID, r.Status, r.ResultJobID, r.Result, j2.ID, j1.ID)
	}
	wantTimeP(t, "DedupUntil after reopening", r.DedupUntil, now.Add(time.Hour))
	wantExisting(t, "within the new window", insertAll(t, s, now.Add(10*time.Minute), keyed("k", "K", "fp"))[0], j2.ID, "")

	// After the window another fingerprint is no error: a new job.
	o1 := insert1(t, s, at(0), keyed("k", "O", "one"))
	o2 := insert1(t, s, at(2*time.Hour), keyed("k", "O", "two"))
	if o1.ID == o2.ID {
		t.Errorf("no new job for another fingerprint after the window")
	}
	if r := record(t, s, "default", "O", at(2*time.Hour)); r.JobID != o2.ID || r.Fingerprint != hash("two") {
		t.Errorf("record O: job %d fingerprint %s, want job %d and the new fingerprint", r.JobID, r.Fingerprint, o2.ID)
	}
}

func testDedupWindowZero(t *testing.T, s store.Store) {
	zero := func(kind, key string) *store.JobInsertParams {
		p := keyed(kind, key, "fp")
		p.DedupWindow = 0
		p.ResultTTL = time.Hour
		return p
	}
	j1 := insert1(t, s, at(0), zero("k", "K"))
	r := record(t, s, "default", "K", at(0))
	wantNil(t, "DedupUntil (window 0)", r.DedupUntil)
	// A live record's expiry is always a time: projected from its job's
	// earliest finish (now, run_at, the end of its lease) + its result TTL.
	wantTimeP(t, "ExpiresAt (window 0, available)", r.ExpiresAt, at(time.Hour))
	late := at(30 * 24 * time.Hour)
	wantTimeP(t, "ExpiresAt (window 0, available, later)", record(t, s, "default", "K", late).ExpiresAt, late.Add(time.Hour))
	wantExisting(t, "window 0 while available", insertAll(t, s, late, zero("k", "K"))[0], j1.ID, idemtype.StateAvailable)
	c := claimJob(t, s, j1, late)
	wantTimeP(t, "ExpiresAt (window 0, running)", record(t, s, "default", "K", late).ExpiresAt, late.Add(lease+time.Hour))
	sched := zero("k", "KS")
	sched.RunAt = at(3 * time.Hour)
	insert1(t, s, at(0), sched)
	wantTimeP(t, "ExpiresAt (window 0, scheduled)", record(t, s, "default", "KS", at(0)).ExpiresAt, at(4*time.Hour))
	wantExisting(t, "window 0 while running", insertAll(t, s, late, zero("k", "K"))[0], j1.ID, idemtype.StateRunning)

	fin := late.Add(time.Minute)
	finish1(t, s, completion(c, `"r"`, fin))
	r = record(t, s, "default", "K", fin)
	wantTimeP(t, "DedupUntil after finish (window 0)", r.DedupUntil, fin)
	wantTimeP(t, "ExpiresAt after finish (window 0)", r.ExpiresAt, fin.Add(time.Hour))
	j2 := insert1(t, s, fin.Add(time.Second), zero("k", "K"))
	if j2.ID == j1.ID {
		t.Fatalf("window 0: no new job after the first finished")
	}
	r = record(t, s, "default", "K", fin.Add(time.Second))
	if r.JobID != j2.ID || r.Status != idemtype.RecordCompleted || r.ResultJobID != j1.ID {
		t.Errorf("record: job %d status %s result job %d, want %d, completed, %d", r.JobID, r.Status, r.ResultJobID, j2.ID, j1.ID)
	}
	wantNil(t, "DedupUntil of the new window-0 job", r.DedupUntil)
	wantExisting(t, "window 0 blocks again", insertAll(t, s, fin.Add(time.Hour/2), zero("k", "K"))[0], j2.ID, idemtype.StateAvailable)

	// Dead and cancelled jobs reopen the key too.
	d1 := insert1(t, s, at(0), zero("kd", "D"))
	killJob(t, s, d1, at(time.Minute))
	r = record(t, s, "default", "D", at(time.Minute+time.Second-time.Microsecond))
	wantTimeP(t, "DedupUntil after a dead finish (window 0)", r.DedupUntil, at(time.Minute+time.Second))
	wantTimeP(t, "ExpiresAt after a dead finish (window 0)", r.ExpiresAt, at(time.Minute+time.Second))
	if r.Status != idemtype.RecordFailed || r.Result != nil {
		t.Errorf("record of a dead job: status %s result %q", r.Status, r.Result)
	}
	if d2 := insert1(t, s, at(2*time.Minute), zero("kd", "D")); d2.ID == d1.ID {
		t.Errorf("window 0: no new job after a dead one")
	}
	x1 := insert1(t, s, at(0), zero("kx", "X"))
	cancelJob(t, s, x1, at(time.Minute))
	if x2 := insert1(t, s, at(2*time.Minute), zero("kx", "X")); x2.ID == x1.ID {
		t.Errorf("window 0: no new job after a cancelled one")
	}
}

func testKeyDuplicateInBatch(t *testing.T, s store.Store) {
	res := insertAll(t, s, at(0), keyed("a", "K", "fp"), newJob("plain"), keyed("b", "K", "fp"), keyed("c", "K", "other"))
	if res[0].Err != nil || res[0].Existing || res[0].Job == nil {
		t.Fatalf("first item: %+v", res[0])
	}
	id := res[0].Job.ID
	if res[1].Err != nil || res[1].Existing {
		t.Errorf("plain item: %+v", res[1])
	}
	wantExisting(t, "second item with the key", res[2], id, idemtype.StateAvailable)
	wantKeyReused(t, "third item with another fingerprint", res[3], "K", id)
	if n := len(listAll(t, s, store.JobFilter{})); n != 2 {
		t.Errorf("%d jobs, want 2", n)
	}
}

func testKeyAfterRecordDelete(t *testing.T, s store.Store) {
	j1 := insert1(t, s, at(0), keyed("k", "K", "one"))
	wantOK(t, "RecordDelete", s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "default", Key: "K"}))
	_, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K", Now: at(0)})
	wantErr(t, "RecordGet after delete", err, idemtype.ErrNotFound)
	wantErr(t, "second RecordDelete", s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "default", Key: "K"}), idemtype.ErrNotFound)
	j2 := insert1(t, s, at(time.Minute), keyed("k", "K", "two"))
	if j2.ID == j1.ID {
		t.Errorf("no new job after RecordDelete")
	}
	if r := record(t, s, "default", "K", at(time.Minute)); r.JobID != j2.ID || r.Fingerprint != hash("two") {
		t.Errorf("record: job %d fingerprint %s", r.JobID, r.Fingerprint)
	}
}

func testKeyFailedItem(t *testing.T, s store.Store) {
	bad := keyed("bad", "K", "one")
	bad.DependsOn = []int64{424242}
	res := insertAll(t, s, at(0), bad, keyed("good", "K", "two"))
	if res[0].Err == nil {
		t.Fatalf("item with an unknown dependency inserted")
	}
	if res[1].Err != nil || res[1].Existing || res[1].Job == nil {
		t.Fatalf("second item with the key of a failed item: %+v", res[1])
	}
	r := record(t, s, "default", "K", at(0))
	if r.JobID != res[1].Job.ID || r.Fingerprint != hash("two") {
		t.Errorf("record: job %d fingerprint %s, want job %d and the second fingerprint", r.JobID, r.Fingerprint, res[1].Job.ID)
	}
	// A refused reuse leaves the record as it was.
	wantKeyReused(t, "reuse", insertAll(t, s, at(time.Second), keyed("x", "K", "three"))[0], "K", res[1].Job.ID)
	if r := record(t, s, "default", "K", at(time.Second)); r.Fingerprint != hash("two") || r.JobID != res[1].Job.ID {
		t.Errorf("a refused reuse changed the record: job %d fingerprint %s", r.JobID, r.Fingerprint)
	}
}
