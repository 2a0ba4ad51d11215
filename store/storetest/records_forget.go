package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// recordForgetCases: RecordRelease with Forget deletes the record its
// owner holds in progress, and nothing else.
func recordForgetCases() []testCase {
	return []testCase{
		{"Records/release_forget_deletes_only_held_unfinished_record", testRecordReleaseForget},
	}
}

// testRecordReleaseForget: Forget deletes the in-progress record of no
// job whose lease Owner holds (the key is free and leaves no entry); it
// leaves alone a record another owner holds, a completed record, and a
// job's record (as JobLease does, Forget never acts for a job's run).
func testRecordReleaseForget(t *testing.T, s store.Store) {
	ctx := t.Context()
	forget := func(key, owner string) {
		t.Helper()
		wantOK(t, "forget "+key, s.RecordRelease(ctx, &store.RecordReleaseParams{Tenant: "default", Key: key, Owner: owner, Forget: true}))
	}
	gone := func(key string) {
		t.Helper()
		if _, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: key, Now: at(time.Second)}); !errors.Is(err, idemtype.ErrNotFound) {
			t.Errorf("record %s after its holder forgot it: err %v, want ErrNotFound", key, err)
		}
	}
	acquire(t, s, acq("held", "o1", at(0)))
	forget("held", "o2")
	if r := record(t, s, "default", "held", at(time.Second)); r.LeaseOwner != "o1" {
		t.Errorf("forget by another owner: the record's owner is %q, want o1", r.LeaseOwner)
	}
	forget("held", "o1")
	gone("held")
	st, err := s.RecordStats(ctx, &store.RecordStatsParams{Tenant: "default", Now: at(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 0 {
		t.Errorf("entries after the only record was forgotten: %d", st.Entries)
	}
	// The key is free: another owner takes it as a new key.
	if r := acquire(t, s, acq("held", "o3", at(2*time.Second))); !r.Acquired || r.Record.LeaseOwner != "o3" {
		t.Errorf("acquire after forget: acquired %v, owner %q", r.Acquired, r.Record.LeaseOwner)
	}

	acquire(t, s, acq("done", "o1", at(0)))
	wantOK(t, "complete", complete(t, s, "done", "o1", `"r"`, at(time.Second)))
	forget("done", "o1")
	if r := record(t, s, "default", "done", at(2*time.Second)); r.Status != idemtype.RecordCompleted {
		t.Errorf("forget of a completed record: status %s", r.Status)
	}

	insertNew(t, s, at(0), keyed("k", "jobkey", "fp"))
	forget("jobkey", store.JobOwner(1)) // whatever the owner: a job's record stays
	if r := record(t, s, "default", "jobkey", at(time.Second)); r.JobID == 0 {
		t.Errorf("forget of a job's record: %+v", r)
	}
	forget("missing", "o1")
}
