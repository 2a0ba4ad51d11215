package storetest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func lifecycleCases() []testCase {
	return []testCase{
		{"Store/migrate_again_and_concurrently", testMigrateAgain},
		{"Store/calls_after_close_fail", testCallsAfterClose},
		{"Store/zero_now_means_time_now", testZeroNow},
		{"JobInsertMany/empty_batch", testInsertEmpty},
		{"Race/record_acquire_one_winner", testRaceAcquire},
		{"Race/leader_one_winner", testRaceLeader},
	}
}

func testMigrateAgain(t *testing.T, s store.Store) {
	insert1(t, s, at(0), newJob("k"))
	if err := parallel(4, func(int) error { return s.Migrate(t.Context()) }); err != nil {
		t.Fatalf("Migrate of a migrated store: %v", err)
	}
	if n := len(listAll(t, s, store.JobFilter{})); n != 1 {
		t.Errorf("%d jobs after Migrate, want 1", n)
	}
}

func testCallsAfterClose(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, insert1(t, s, at(0), newJob("c")), at(0))
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v, want nil (idempotent)", err)
	}
	_, err := s.JobGet(t.Context(), &store.JobGetParams{Tenant: "", ID: j.ID})
	wantErr(t, "JobGet after Close", err, idemtype.ErrClosed)
	wantErr(t, "Ping after Close", s.Ping(t.Context()), idemtype.ErrClosed)
	_, err = s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{newJob("k")}, Now: at(0)})
	wantErr(t, "JobInsertMany after Close", err, idemtype.ErrClosed)
	_, err = s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 1,
		LeaseUntil: at(time.Minute), Now: at(0)})
	wantErr(t, "JobClaim after Close", err, idemtype.ErrClosed)
	_, err = s.JobFinishMany(t.Context(), []*store.JobFinishParams{completion(c, `{}`, at(time.Second))})
	wantErr(t, "JobFinishMany after Close", err, idemtype.ErrClosed)
	wantErr(t, "store.ErrClosed", store.ErrClosed, idemtype.ErrClosed)
}

func testZeroNow(t *testing.T, s store.Store) {
	before := time.Now().UTC().Truncate(time.Microsecond)
	p := newJob("k")
	p.RunAt = before.Add(-time.Second)
	j := insert1(t, s, time.Time{}, p)
	c := claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 1,
		LeaseUntil: before.Add(time.Hour)})
	after := time.Now().UTC().Add(time.Microsecond)
	if j.CreatedAt.Before(before) || j.CreatedAt.After(after) {
		t.Errorf("CreatedAt %v with a zero Now, want between %v and %v", j.CreatedAt, before, after)
	}
	if len(c) != 1 {
		t.Fatalf("claim with a zero Now returned %d jobs, want 1", len(c))
	}
	if st := c[0].StartedAt; st == nil || st.Before(before) || st.After(after) {
		t.Errorf("StartedAt %v with a zero Now, want between %v and %v", st, before, after)
	}
}

func testInsertEmpty(t *testing.T, s store.Store) {
	res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Now: at(0)})
	if err != nil || len(res) != 0 {
		t.Errorf("empty batch: %v %v", res, err)
	}
}

func testRaceAcquire(t *testing.T, s store.Store) {
	var won atomic.Int32
	var winner atomic.Value
	err := parallel(32, func(i int) error {
		owner := fmt.Sprint("owner-", i)
		r, err := s.RecordAcquire(t.Context(), acq("K", owner, at(0)))
		if err != nil {
			return err
		}
		if r.Acquired {
			won.Add(1)
			winner.Store(owner)
		} else if r.Record == nil || r.Record.LeaseOwner == "" || r.Record.LeaseOwner == owner {
			return fmt.Errorf("refused acquire shows holder %v", r.Record)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := won.Load(); n != 1 {
		t.Fatalf("%d owners acquired the key, want 1", n)
	}
	if r := record(t, s, "default", "K", at(0)); r.LeaseOwner != winner.Load() || r.Status != idemtype.RecordInProgress {
		t.Errorf("record owner %q, want the winner %v", r.LeaseOwner, winner.Load())
	}
}

func testRaceLeader(t *testing.T, s store.Store) {
	var won atomic.Int32
	err := parallel(16, func(i int) error {
		ok, err := s.LeaderAttempt(t.Context(), &store.LeaderParams{Name: "m", Owner: fmt.Sprint("node-", i), TTL: time.Minute, Now: at(0)})
		if ok {
			won.Add(1)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := won.Load(); n != 1 {
		t.Errorf("%d leaders, want 1", n)
	}
}
