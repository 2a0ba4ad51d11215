package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// A job that takes a stored lease on its key (its record had expired when
// it was claimed, so the executor's acquire created it afresh with
// ExpiresAt = now + the kind's result TTL) holds that key for as long as
// its job lease lives, like a Do caller (docs/state-machine.md,
// "Idempotency keys"): a result TTL shorter than the work never frees a
// held key. And a completion is accepted only while its owner holds a live
// record (store.Records.RecordComplete, as RecordRenew).
func recordJobLeaseCases() []testCase {
	return []testCase{
		{"RecordLease/job_stored_lease_outlives_a_shorter_result_ttl", testJobStoredLeaseOutlivesTTL},
		{"RecordComplete/expired_record_lease_lost", testRecordCompleteExpired},
	}
}

// storedJobLease inserts a job of key at 0 (window 1 min, result TTL
// jobLeaseTTL) and claims it at 2 min, after its window: its record
// expired, so its acquire (as the executor makes it: expiry now + result
// TTL) takes a stored lease with its job lease (until 7 min).
func storedJobLease(t *testing.T, s store.Store, key string) *idemtype.JobRow {
	t.Helper()
	a := insert1(t, s, at(0), windowed("a-"+key, key, jobLeaseTTL))
	claimed := at(2 * time.Minute)
	ca := claimJob(t, s, a, claimed)
	if ca.KeyHeld {
		t.Fatalf("%s: the claim reports its key held although its record expired at the window's end", key)
	}
	p := ownAcquire(ca, claimed)
	p.ExpiresAt = claimed.Add(jobLeaseTTL) // executor.keyParams
	if got := acquire(t, s, p); !got.Acquired {
		t.Fatalf("%s: the job could not take its expired key: %+v", key, got.Record)
	}
	return ca
}

// jobLeaseTTL is the result TTL of storedJobLease's jobs: shorter than
// their job lease.
const jobLeaseTTL = 10 * time.Second

// testJobStoredLeaseOutlivesTTL: at 2 min 30 s, past the acquire's now +
// result TTL but before the job's first heartbeat, a job holding a stored
// lease (storedJobLease) still holds its key: readers see it (K1), a Do
// caller is refused (K1), the expiry sweep keeps the record (K2), and a new
// job b of the key (a new job: the window passed) waits behind it instead
// of running beside it (K3).
func testJobStoredLeaseOutlivesTTL(t *testing.T, s store.Store) {
	now := at(2*time.Minute + 30*time.Second)

	c1 := storedJobLease(t, s, "K1")
	owner, aLease := store.JobOwner(c1.ID), *c1.LeaseExpiresAt
	if r, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K1", Now: now}); err != nil {
		t.Errorf("RecordGet at 2m30s while job %d runs holding K1 (lease until %v): %v", c1.ID, aLease, err)
	} else {
		wantHolder(t, "RecordGet at 2m30s", r, owner, aLease)
	}
	if got := acquire(t, s, acq("K1", "do:x", now)); got.Acquired {
		t.Errorf("a Do caller acquired K1 at 2m30s while job %d runs holding it until %v", c1.ID, aLease)
	}

	c2 := storedJobLease(t, s, "K2")
	if _, err := s.RecordDeleteExpired(t.Context(), &store.RecordDeleteExpiredParams{Now: now, Limit: 100}); err != nil {
		t.Fatalf("RecordDeleteExpired: %v", err)
	}
	if _, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "K2", Now: now}); err != nil {
		t.Errorf("after the expiry sweep at 2m30s, the record of K2 that job %d holds until %v: %v",
			c2.ID, *c2.LeaseExpiresAt, err)
	}

	c3 := storedJobLease(t, s, "K3")
	rb := insertAll(t, s, now, windowed("b", "K3", jobLeaseTTL))[0]
	if rb.Err != nil || rb.Existing || rb.Job == nil {
		t.Fatalf("insert of b after the window of K3: %+v, want a new job", rb)
	}
	cb := claimJob(t, s, rb.Job, now)
	if cb.KeyHeld {
		t.Errorf("b's claim reports K3 held by b while job %d runs holding it: two executions of one key at once", c3.ID)
	}
	if got, err := jobAcquire(t.Context(), s, cb, now); err != nil {
		t.Fatalf("b's acquire: %v", err)
	} else if got.Acquired {
		t.Errorf("b acquired K3 while job %d runs holding it: two executions of one key at once", c3.ID)
	} else {
		wantHolder(t, "b refused", got.Record, store.JobOwner(c3.ID), *c3.LeaseExpiresAt)
	}
}

// testRecordCompleteExpired: a lease record (acq: lease 1 min, expiry one
// day) that expired while nobody took it over is no longer held: its
// owner's late completion is ErrLeaseLost and writes nothing (the record
// stays expired), as a late renewal is (RecordRenew).
func testRecordCompleteExpired(t *testing.T, s store.Store) {
	acquire(t, s, acq("E", "o1", at(0)))
	late := at(25 * time.Hour)
	wantErr(t, "complete of an expired record", complete(t, s, "E", "o1", `"late"`, late), idemtype.ErrLeaseLost)
	if r, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "E", Now: late}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Errorf("after a refused completion of an expired record: RecordGet %+v, %v; want ErrNotFound", r, err)
	}
}
