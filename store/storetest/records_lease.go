package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The derived execution lease (docs/state-machine.md, "Idempotency keys"):
// a running job whose key's record is its own holds the record's lease by
// its job lease, without writing the record. These cases hold every other
// reader and acquirer to it.
func recordLeaseCases() []testCase {
	return []testCase{
		{"RecordLease/running_job_holds_its_record_by_its_job_lease", testDerivedLease},
		{"RecordLease/lapsed_and_rescued_job_lease_frees_the_record", testDerivedLeaseRescued},
		{"RecordLease/reopen_writes_the_running_job_lease", testDerivedLeaseReopen},
		{"JobClaim/key_held_only_for_the_jobs_own_live_record", testKeyHeld},
		{"Race/job_and_8_other_owners_acquire_one_key", testRaceDerivedLease},
		{"Race/running_job_and_reopening_job_of_one_key", testRaceDerivedReopen},
		{"Race/rescue_and_late_completion_of_a_keyed_job", testRaceRescueCompletion},
	}
}

// ownAcquire is the acquire a claimed job's executor makes for its key
// (executor.keyParams): its lease end is the job's.
func ownAcquire(j *idemtype.JobRow, now time.Time) *store.RecordAcquireParams {
	return &store.RecordAcquireParams{Tenant: j.Tenant, Key: j.IdempotencyKey, Owner: store.JobOwner(j.ID),
		JobID: j.ID, LeaseUntil: *j.LeaseExpiresAt, DedupUntil: now, ExpiresAt: now.Add(24 * time.Hour), Now: now}
}

// wantHolder checks a record's lease holder and its end.
func wantHolder(t *testing.T, what string, r *idemtype.Record, owner string, until time.Time) {
	t.Helper()
	if r.LeaseOwner != owner {
		t.Errorf("%s: lease owner %q, want %q", what, r.LeaseOwner, owner)
	}
	wantTimeP(t, what+": LeaseUntil", r.LeaseUntil, until)
}

// testDerivedLease: a claimed job's acquire of its own record succeeds and
// reads the job's lease (at(5m)), not the one it asked for (at(1m)): the
// record was not written. Others are refused and see the job as holder;
// the job's heartbeat moves the lease; its completion ends it.
func testDerivedLease(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), keyed("k", "K", "fp"))
	ca := claimJob(t, s, a, at(0))
	p := ownAcquire(ca, at(time.Second))
	p.LeaseUntil = at(time.Minute)
	res := acquire(t, s, p)
	if !res.Acquired {
		t.Fatalf("the running job could not acquire its own record: %+v", res.Record)
	}
	owner := store.JobOwner(a.ID)
	wantHolder(t, "acquired record", res.Record, owner, at(lease))
	wantHolder(t, "RecordGet", record(t, s, "default", "K", at(2*time.Second)), owner, at(lease))
	for _, other := range []*store.RecordAcquireParams{acq("K", "do:x", at(2*time.Minute)),
		{Tenant: "default", Key: "K", Owner: "job:999", JobID: 999, LeaseUntil: at(3 * time.Minute), Now: at(2 * time.Minute)}} {
		got := acquire(t, s, other)
		if got.Acquired {
			t.Fatalf("%s acquired a record its running job holds", other.Owner)
		}
		wantHolder(t, other.Owner+" refused", got.Record, owner, at(lease))
		many, err := s.RecordAcquireMany(t.Context(), []*store.RecordAcquireParams{other, acq("K2-"+other.Owner, other.Owner, at(2*time.Minute))})
		if err != nil {
			t.Fatalf("RecordAcquireMany: %v", err)
		}
		if many[0].Acquired || !many[1].Acquired {
			t.Errorf("%s in a batch: acquired %v, %v; want false, true", other.Owner, many[0].Acquired, many[1].Acquired)
		}
	}
	errs := heartbeat(t, s, at(10*time.Minute), at(3*time.Minute), leaseOf(ca))
	wantOK(t, "heartbeat", errs[0])
	wantHolder(t, "after heartbeat", record(t, s, "default", "K", at(3*time.Minute)), owner, at(10*time.Minute))
	if got := acquire(t, s, acq("K", "do:x", at(6*time.Minute))); got.Acquired {
		t.Errorf("acquired past the old lease end but within the heartbeat's")
	}
	finish1(t, s, completion(ca, `"done"`, at(7*time.Minute)))
	r := record(t, s, "default", "K", at(7*time.Minute))
	if r.Status != idemtype.RecordCompleted || string(r.Result) != `"done"` || r.LeaseOwner != "" || r.LeaseUntil != nil {
		t.Errorf("record after completion: status %s result %q owner %q until %v", r.Status, r.Result, r.LeaseOwner, r.LeaseUntil)
	}
}

// testDerivedLeaseRescued: once the job's lease lapses another owner may
// take the record; the rescue ends the job's attempt; the late completion
// of that attempt is refused by its lease token and caches nothing; the
// next attempt finds the key held. Without the other owner, the next
// attempt holds its record again, and only its completion is cached.
func testDerivedLeaseRescued(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), keyed("k", "K", "fp"))
	ca := claimJob(t, s, a, at(0))
	if !acquire(t, s, ownAcquire(ca, at(0))).Acquired {
		t.Fatal("job could not acquire its own record")
	}
	if got := acquire(t, s, acq("K", "do:x", at(lease))); !got.Acquired {
		t.Fatalf("a lapsed job lease still holds the record: %+v", got.Record)
	}
	wantIDs(t, "rescued", rescue(t, s, at(lease+time.Second), 10), []int64{a.ID})
	err := finishAll(t, s, completion(ca, `"late"`, at(lease+2*time.Second)))[0]
	wantErr(t, "completion after the rescue", err, idemtype.ErrLeaseLost)
	r := record(t, s, "default", "K", at(lease+2*time.Second))
	if r.Status != idemtype.RecordInProgress || r.Result != nil {
		t.Errorf("a refused completion touched the record: %+v", r)
	}
	wantHolder(t, "after the rescue", r, "do:x", at(lease+time.Minute))
	ca2 := claimJob(t, s, a, at(lease+3*time.Second))
	if got := acquire(t, s, ownAcquire(ca2, at(lease+3*time.Second))); got.Acquired {
		t.Errorf("the next attempt acquired a key another owner holds")
	}

	b := insert1(t, s, at(0), keyed("k2", "K2", "fp"))
	cb := claimJob(t, s, b, at(0))
	acquire(t, s, ownAcquire(cb, at(0)))
	wantIDs(t, "rescued", rescue(t, s, at(lease+time.Second), 10), []int64{b.ID})
	if r := record(t, s, "default", "K2", at(lease+time.Second)); r.LeaseOwner != "" {
		t.Errorf("a rescued job still holds its record: %q", r.LeaseOwner)
	}
	cb2 := claimJob(t, s, b, at(lease+2*time.Second))
	if got := acquire(t, s, ownAcquire(cb2, at(lease+2*time.Second))); !got.Acquired {
		t.Fatalf("the next attempt could not acquire its own record: %+v", got.Record)
	}
	wantErr(t, "late completion", finishAll(t, s, completion(cb, `"late"`, at(lease+3*time.Second)))[0], idemtype.ErrLeaseLost)
	finish1(t, s, completion(cb2, `"second"`, at(lease+4*time.Second)))
	if r := record(t, s, "default", "K2", at(lease+5*time.Second)); string(r.Result) != `"second"` {
		t.Errorf("cached %q, want the second attempt's result", r.Result)
	}
}

// reopenable makes job a of key K (a one-minute window) run with its
// record reopenable while it holds it by its job lease: its first attempt
// at(2m) starts the expired record afresh (DedupUntil at(2m)) and fails;
// the second is claimed at(3m). It returns the second attempt.
func reopenable(t *testing.T, s store.Store, key string) *idemtype.JobRow {
	t.Helper()
	p := keyed("a-"+key, key, "fp")
	p.DedupWindow = time.Minute
	a := insert1(t, s, at(0), p)
	c1 := claimJob(t, s, a, at(2*time.Minute))
	if !acquire(t, s, ownAcquire(c1, at(2*time.Minute))).Acquired {
		t.Fatal("first attempt could not acquire")
	}
	finish1(t, s, failure(c1, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(2*time.Minute), at(2*time.Minute)))
	return a
}

// testDerivedLeaseReopen: a job of the key inserted after the window
// reopens the record while the first job runs holding it by its job lease:
// the lease is written into the record, so the second job is refused.
func testDerivedLeaseReopen(t *testing.T, s store.Store) {
	a := reopenable(t, s, "K")
	ca := claimJob(t, s, a, at(3*time.Minute))
	if got := acquire(t, s, ownAcquire(ca, at(3*time.Minute))); !got.Acquired {
		t.Fatalf("second attempt could not acquire: %+v", got.Record)
	}
	pb := keyed("b", "K", "fp")
	b := insert1(t, s, at(4*time.Minute), pb)
	r := record(t, s, "default", "K", at(4*time.Minute))
	if r.JobID != b.ID {
		t.Fatalf("record names job %d, want the reopening job %d", r.JobID, b.ID)
	}
	owner := store.JobOwner(a.ID)
	wantHolder(t, "reopened record", r, owner, at(3*time.Minute+lease))
	cb := claimJob(t, s, b, at(4*time.Minute))
	got := acquire(t, s, ownAcquire(cb, at(4*time.Minute)))
	if got.Acquired {
		t.Fatal("the reopening job acquired a key the running first job holds")
	}
	wantHolder(t, "refused", got.Record, owner, at(3*time.Minute+lease))
	wantOK(t, "heartbeat", heartbeat(t, s, at(20*time.Minute), at(5*time.Minute), leaseOf(ca))[0])
	wantHolder(t, "after heartbeat", record(t, s, "default", "K", at(5*time.Minute)), owner, at(20*time.Minute))
}

// claimKind claims the one job of kind at now. A claim skips a job whose
// row another statement holds locked (an acquirer reading its lease, a
// reopening insert), as a worker's would; it is tried again, as a worker's
// next poll would.
func claimKind(ctx context.Context, s store.Store, kind string, now time.Time) (*idemtype.JobRow, error) {
	for range 10_000 {
		c, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, Kinds: []string{kind},
			WorkerID: "w", Limit: 1, LeaseUntil: now.Add(lease), Now: now})
		if err != nil {
			return nil, err
		}
		if len(c) == 1 {
			return c[0], nil
		}
	}
	return nil, fmt.Errorf("claim of %s: no job", kind)
}

// jobAcquire is a claimed job's acquire of its key as its executor makes
// it: a job the claim returned with KeyHeld holds it without asking the
// store (internal/executor.AcquireKeys); any other asks (ownAcquire).
func jobAcquire(ctx context.Context, s store.Store, c *idemtype.JobRow, now time.Time) (*store.RecordAcquireResult, error) {
	if c.KeyHeld {
		return &store.RecordAcquireResult{Acquired: true}, nil
	}
	return s.RecordAcquire(ctx, ownAcquire(c, now))
}

// acquired counts the acquisitions of one round of a race.
type acquired struct{ n atomic.Int32 }

func (a *acquired) add(res *store.RecordAcquireResult) {
	if res.Acquired {
		a.n.Add(1)
	}
}

// testRaceDerivedLease: per round, a job of a fresh key is claimed and
// acquires its record (as its executor does: a claim's KeyHeld is the
// acquire) while 8 other owners acquire the key; every lease outlives the
// round, so exactly one of the nine holds the key. Overlap: parallel's
// start barrier releases the nine together; the job's claim and acquire
// run back to back, as an executor's do; in odd rounds the others start
// with the claim (against the claim's own reading of the record), in even
// ones once it returned (against the job's acquire).
func testRaceDerivedLease(t *testing.T, s store.Store) {
	const rounds, others = 40, 8
	for round := range rounds {
		key := fmt.Sprintf("K%d", round)
		j := insert1(t, s, at(0), keyed("k"+key, key, "fp"))
		var got acquired
		claimed := make(chan struct{})
		err := parallel(others+1, func(i int) error {
			if i == 0 {
				c, err := claimKind(t.Context(), s, j.Kind, at(0))
				close(claimed)
				if err != nil {
					return err
				}
				res, err := jobAcquire(t.Context(), s, c, at(0))
				if err != nil {
					return err
				}
				got.add(res)
				return nil
			}
			if round%2 == 0 {
				<-claimed // race the job's acquire, not its claim
			}
			p := acq(key, fmt.Sprintf("do:%d", i), at(time.Second))
			if i%4 == 0 {
				p.JobID, p.Owner = int64(1_000_000+i), store.JobOwner(int64(1_000_000+i))
			}
			res, err := s.RecordAcquire(t.Context(), p)
			if err != nil {
				return err
			}
			got.add(res)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := got.n.Load(); n != 1 {
			t.Fatalf("round %d: %d of %d acquirers hold the key, want 1", round, n, others+1)
		}
	}
}

// testRaceDerivedReopen: per round, job a's second attempt (reopenable) is
// claimed and acquires while job b of the key is inserted after the window,
// claimed and acquires; exactly one of the two holds the key. Overlap:
// parallel's start barrier releases both together; in even rounds b's
// insert waits for a's claim, so it races a's acquire.
func testRaceDerivedReopen(t *testing.T, s store.Store) {
	const rounds = 25
	for round := range rounds {
		key := fmt.Sprintf("K%d", round)
		a := reopenable(t, s, key)
		var got acquired
		claimed := make(chan struct{})
		err := parallel(2, func(i int) error {
			kind, now := a.Kind, at(3*time.Minute)
			if i == 1 {
				if round%2 == 0 {
					<-claimed // race a's acquire, not its claim
				}
				res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{
					Jobs: []*store.JobInsertParams{keyed("b-"+key, key, "fp")}, Now: at(4 * time.Minute)})
				if err != nil || res[0].Err != nil || res[0].Existing {
					return fmt.Errorf("insert b: %v %+v", err, res)
				}
				kind, now = "b-"+key, at(4*time.Minute)
			}
			c, err := claimKind(t.Context(), s, kind, now)
			if i == 0 {
				close(claimed)
			}
			if err != nil {
				return err
			}
			res, err := jobAcquire(t.Context(), s, c, now)
			if err != nil {
				return err
			}
			got.add(res)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := got.n.Load(); n != 1 {
			t.Fatalf("round %d: %d of the key's two running jobs hold it, want 1", round, n)
		}
	}
}

// testRaceRescueCompletion: per round, a keyed job holding its record by a
// lapsed job lease is rescued while its late completion arrives and 4 other
// owners acquire the key. Exactly one of the rescue and the completion
// wins the job row (its lease token fences the other); the record is
// completed with the job's result exactly when the completion won. Overlap:
// parallel's start barrier releases the six together.
func testRaceRescueCompletion(t *testing.T, s store.Store) {
	const rounds, others = 25, 4
	late := at(lease + time.Second)
	for round := range rounds {
		key := fmt.Sprintf("K%d", round)
		j := insert1(t, s, at(0), keyed("k"+key, key, "fp"))
		c := claimJob(t, s, j, at(0))
		if !acquire(t, s, ownAcquire(c, at(0))).Acquired {
			t.Fatal("job could not acquire its own record")
		}
		var rescued, completed atomic.Bool
		err := parallel(others+2, func(i int) error {
			switch i {
			case 0:
				got, err := s.JobRescue(t.Context(), &store.JobRescueParams{Now: late, Limit: 1000})
				for _, r := range got {
					if r.ID == j.ID {
						rescued.Store(true)
					}
				}
				return err
			case 1:
				errs, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{completion(c, `"r"`, late)})
				if err != nil {
					return err
				}
				completed.Store(errs[0] == nil)
				return nil
			}
			_, err := s.RecordAcquire(t.Context(), acq(key, fmt.Sprintf("do:%d", i), late))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if rescued.Load() == completed.Load() {
			t.Fatalf("round %d: rescued %v, completed %v: want exactly one", round, rescued.Load(), completed.Load())
		}
		r := record(t, s, "default", key, late)
		if done := r.Status == idemtype.RecordCompleted && string(r.Result) == `"r"`; done != completed.Load() {
			t.Fatalf("round %d: completion won %v, record %s %q", round, completed.Load(), r.Status, r.Result)
		}
	}
}

// testKeyHeld: a claim reports KeyHeld exactly for the keyed jobs whose
// record names them, is in progress, stores no lease and is live: a fresh
// key; not a keyless job, a key another owner leased while the job waited,
// a deleted record, a record past its expiry, a claim without a lease end.
// Where it is reported, the job's own acquire agrees (acquired, and the
// record still stores no lease: the job holds it by its job lease).
func testKeyHeld(t *testing.T, s store.Store) {
	fresh := insert1(t, s, at(0), keyed("fresh", "K-fresh", "fp"))
	plain := insert1(t, s, at(0), newJob("plain"))
	leased := insert1(t, s, at(0), keyed("leased", "K-leased", "fp"))
	if !acquire(t, s, acq("K-leased", "do:other", at(0))).Acquired {
		t.Fatal("another owner could not lease the waiting job's key")
	}
	deleted := insert1(t, s, at(0), keyed("deleted", "K-deleted", "fp"))
	wantOK(t, "RecordDelete", s.RecordDelete(t.Context(), &store.RecordDeleteParams{Tenant: "default", Key: "K-deleted"}))
	short := keyed("expired", "K-expired", "fp")
	short.DedupWindow = time.Second
	expired := insert1(t, s, at(0), short)

	now := at(time.Minute) // past K-expired's window, within the others'
	want := map[int64]bool{fresh.ID: true, plain.ID: false, leased.ID: false, deleted.ID: false, expired.ID: false}
	for _, j := range []*idemtype.JobRow{fresh, plain, leased, deleted, expired} {
		c := claimJob(t, s, j, now)
		if c.KeyHeld != want[j.ID] {
			t.Errorf("job %s: KeyHeld %v, want %v", j.Kind, c.KeyHeld, want[j.ID])
		}
		if !c.KeyHeld {
			continue
		}
		if res := acquire(t, s, ownAcquire(c, now)); !res.Acquired {
			t.Errorf("job %s: held by the claim, but its own acquire answered %+v", j.Kind, res)
		}
		r := record(t, s, "default", j.IdempotencyKey, now)
		wantHolder(t, "record of "+j.Kind, r, store.JobOwner(c.ID), *c.LeaseExpiresAt)
	}

	// A claim without a lease end holds nothing (and must not fail).
	insert1(t, s, at(0), keyed("nolease", "K-nolease", "fp"))
	got := claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, Kinds: []string{"nolease"},
		WorkerID: "w", Limit: 1, Now: now})
	if len(got) != 1 || got[0].KeyHeld {
		t.Errorf("claim without a lease end: %+v, want the job, not held", got)
	}
}
