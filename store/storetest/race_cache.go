package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testRaceCachedResults: keyed jobs completed, then, once their window has
// closed while their results live, everything that can touch their records
// at once — acquires by other owners and by stale attempts of the completed
// jobs, reopening inserts of the same keys from four goroutines, the expiry
// sweep, retention, and JobDelete of half the completed jobs. Every acquire is
// refused with the cached result, each key is reopened for exactly one new
// job, and afterwards every record names its new job and still holds the
// first job's result until that result's expiry; the new job's attempt
// gets the cached result. (PostgreSQL reads these completions from the job
// rows, so this races its derivation against every writer.)
func testRaceCachedResults(t *testing.T, s store.Store) {
	const n = 40
	ctx := t.Context()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = keyed("k", fmt.Sprintf("key-%02d", i), "fp") // window 1 h, result TTL 24 h
	}
	first := insertNew(t, s, at(0), ps...)
	fin := at(time.Minute)
	result := func(i int) string { return fmt.Sprintf(`{"key": %d}`, i) }
	for i, j := range first {
		finish1(t, s, completion(claimJob(t, s, j, at(time.Second)), result(i), fin))
	}
	late := at(2 * time.Hour) // the windows closed at 1 h; the results live until fin + 24 h
	check := func(i int, r *idemtype.Record) error {
		if r.Status != idemtype.RecordCompleted || string(r.Result) != result(i) || r.ResultJobID != first[i].ID ||
			r.ResultHash != hash(result(i)) || r.ExpiresAt == nil || !r.ExpiresAt.Equal(fin.Add(24*time.Hour)) {
			return fmt.Errorf("key %d: record %+v", i, r)
		}
		return nil
	}

	var answers keyAnswers
	err := parallel(16, func(g int) error {
		switch {
		case g < 6: // acquires: other owners, and stale attempts of the completed jobs
			for round := range 3 {
				for i := range n {
					p := acq(ps[i].IdempotencyKey, fmt.Sprintf("owner-%d", g), late)
					if g%2 == 1 {
						p.Owner, p.JobID = store.JobOwner(first[i].ID), first[i].ID
					}
					res, err := s.RecordAcquire(ctx, p)
					if err != nil {
						return fmt.Errorf("round %d acquire %d: %w", round, i, err)
					}
					if res.Acquired {
						return fmt.Errorf("round %d: %s took key %d past its cached result: %+v", round, p.Owner, i, res.Record)
					}
					if err := check(i, res.Record); err != nil {
						return err
					}
				}
			}
		case g < 10: // reopening inserts of every key
			for i := range n {
				p := keyed("k", ps[i].IdempotencyKey, "fp")
				res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}, Now: late})
				if err != nil {
					return fmt.Errorf("reopen %d: %w", i, err)
				}
				if err := answers.add([]*store.JobInsertParams{p}, res); err != nil {
					return err
				}
			}
		case g < 12: // the expiry sweep
			for range 10 {
				if k, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: late, Limit: 7}); err != nil || k != 0 {
					return fmt.Errorf("RecordDeleteExpired: %d, %v; want 0 (every result lives)", k, err)
				}
			}
		case g < 14: // retention
			for range 5 {
				if _, err := s.JobDeleteFinished(ctx, &store.JobDeleteFinishedParams{CompletedBefore: late, Limit: 3, Now: late}); err != nil {
					return fmt.Errorf("JobDeleteFinished: %w", err)
				}
			}
		default: // two goroutines JobDelete the completed jobs of the even keys
			for i := 0; i < n; i += 2 {
				err := s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "default", ID: first[i].ID, State: idemtype.StateCompleted})
				if err != nil && !errors.Is(err, idemtype.ErrNotFound) { // the other one or retention took it
					return fmt.Errorf("JobDelete %d: %w", i, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if answers.created != n {
		t.Errorf("%d reopening inserts created a job, want %d (one per key)", answers.created, n)
	}
	for i := range n {
		jobs := answers.jobs[ps[i].IdempotencyKey]
		if len(jobs) != 1 {
			t.Fatalf("key %d answered with jobs %v, want one", i, jobs)
		}
		var next int64
		for id := range jobs {
			next = id
		}
		r := record(t, s, "default", ps[i].IdempotencyKey, late)
		if err := check(i, r); err != nil || r.JobID != next {
			t.Errorf("after the race (new job %d): %v, %+v", next, err, r)
		}
		// The new job's attempt finds the cached result.
		res := acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: ps[i].IdempotencyKey,
			Owner: store.JobOwner(next), JobID: next, LeaseUntil: late.Add(time.Minute), Now: late})
		if res.Acquired {
			t.Errorf("key %d: the new job took the key of a cached result", i)
		} else if err := check(i, res.Record); err != nil {
			t.Error(err)
		}
	}
}
