package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func recordDeleteCases() []testCase {
	return []testCase{
		{"RecordDelete/refused_while_the_running_job_holds_the_key", testRecordDeleteRunningJob},
		{"RecordDelete/refused_while_a_stored_lease_is_live", testRecordDeleteStoredLease},
		{"Race/record_delete_against_the_claim_of_its_job", testRaceRecordDeleteClaim},
	}
}

// deleteAt runs RecordDelete of the key K in the tenant default at now.
func deleteAt(t *testing.T, s store.Store, key string, now time.Time) error {
	t.Helper()
	return s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "default", Key: key, Now: now})
}

// testRecordDeleteRunningJob: the record of a running job's key, which the
// job holds by its job lease (nothing stored), is not deleted while that
// lease lives (ErrKeyInProgress): a new job of the key would otherwise be
// created and claimed, holding the key by its own job lease, and run beside
// the first. The record stays, so a new job of the key is the existing one.
// Once the job finished, the record is deleted and the key is free.
func testRecordDeleteRunningJob(t *testing.T, s store.Store) {
	j1 := insert1(t, s, at(0), keyed("k", "K", "one"))
	c1 := claimJob(t, s, j1, at(time.Second))
	wantErr(t, "delete while the job runs", deleteAt(t, s, "K", at(2*time.Second)), idemtype.ErrKeyInProgress)
	r := record(t, s, "default", "K", at(2*time.Second))
	wantHolder(t, "record after the refused delete", r, store.JobOwner(j1.ID), *c1.LeaseExpiresAt)
	res := insertAll(t, s, at(3*time.Second), keyed("k", "K", "one"))
	if res[0].Err != nil || !res[0].Existing || res[0].Job.ID != j1.ID {
		t.Fatalf("a job of the key after the refused delete: %+v, want the existing job %d", res[0], j1.ID)
	}

	finish1(t, s, completion(c1, `"R"`, at(time.Minute)))
	wantOK(t, "delete once the job completed", deleteAt(t, s, "K", at(time.Minute+time.Second)))
	j2 := insert1(t, s, at(2*time.Minute), keyed("k", "K", "two"))
	if j2.ID == j1.ID {
		t.Errorf("no new job after the delete")
	}
}

// testRecordDeleteStoredLease: a record whose stored lease (a Do, a result
// lease, an Idempotency-Key request) is live is not deleted
// (ErrKeyInProgress): another caller would take the key and run the work
// beside the holder. At the lease's end, or once released, it is.
func testRecordDeleteStoredLease(t *testing.T, s store.Store) {
	acquire(t, s, acq("K", "o1", at(0))) // lease until at(1m)
	wantErr(t, "delete under a live lease", deleteAt(t, s, "K", at(30*time.Second)), idemtype.ErrKeyInProgress)
	if res := acquire(t, s, acq("K", "o2", at(30*time.Second))); res.Acquired {
		t.Fatalf("another owner took the key after the refused delete: %+v", res.Record)
	}
	wantOK(t, "delete at the lease's end", deleteAt(t, s, "K", at(time.Minute)))

	acquire(t, s, acq("L", "o1", at(0)))
	wantOK(t, "release", s.RecordRelease(t.Context(), &store.RecordReleaseParams{Tenant: "default", Key: "L", Owner: "o1"}))
	wantOK(t, "delete of a released key", deleteAt(t, s, "L", at(time.Second)))
	wantErr(t, "delete of a missing key", deleteAt(t, s, "L", at(time.Second)), idemtype.ErrNotFound)
}

// testRaceRecordDeleteClaim: the record of a keyed job is deleted while the
// job is claimed, at once, round after round. Whichever comes first, the
// claim never reports the key held (the job running on the record's
// derived lease) by a record the delete removed: the delete is refused
// once the claim took the job, and a claim after the delete finds no
// record to hold (its attempt acquires the key afresh).
func testRaceRecordDeleteClaim(t *testing.T, s store.Store) {
	const rounds = 20
	now := at(time.Second)
	for i := range rounds {
		kind, k := fmt.Sprintf("rd-%d", i), fmt.Sprintf("K-rd-%d", i)
		j := insert1(t, s, at(0), keyed(kind, k, "fp"))
		var claimed []*idemtype.JobRow
		var delErr error
		err := parallel(2, func(g int) error {
			if g == 0 {
				var err error
				claimed, err = s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{j.Queue}, Kinds: []string{kind},
					WorkerID: "w1", Limit: 1, LeaseUntil: now.Add(lease), Now: now})
				return err
			}
			delErr = s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "default", Key: k, Now: now})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		held := len(claimed) == 1 && claimed[0].KeyHeld
		switch {
		case delErr == nil && held:
			t.Fatalf("round %d: the record was deleted and the claim reports the key held by it", i)
		case delErr != nil && !errors.Is(delErr, idemtype.ErrKeyInProgress):
			t.Fatalf("round %d: delete: %v", i, delErr)
		case delErr != nil && !held:
			t.Fatalf("round %d: delete refused (%v) but the claim did not hold the key: %+v", i, delErr, claimed)
		}
	}
}
