package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func scheduleFireCases() []testCase {
	return []testCase{
		{"Schedules/fire enqueues and records in one step", testScheduleFire},
		{"Schedules/fire of a deleted or changed schedule makes no job", testScheduleFireStale},
		{"Schedules/fire of a refused job records nothing", testScheduleFireRefused},
		{"Schedules/fires racing a delete make no job after it", testScheduleFireRaceDelete},
	}
}

// fire runs one ScheduleFire of the schedule as read, with job (nil: a
// skipped firing) at firing time when (zero: a manual trigger).
func fire(t *testing.T, s store.Store, read *store.Schedule, when time.Time, job *store.JobInsertParams) *store.ScheduleFireResult {
	t.Helper()
	res, err := s.ScheduleFire(t.Context(), &store.ScheduleFireParams{Read: read, At: when, Job: job, Now: at(0)})
	if err != nil {
		t.Fatalf("ScheduleFire(%s/%s at %v): %v", read.Tenant, read.Name, when, err)
	}
	return res
}

// firingJob is the job of a firing of schedule name, keyed as idem keys
// firings: one key per firing.
func firingJob(name string, n int) *store.JobInsertParams {
	p := keyed("fire-"+name, fmt.Sprintf("§%s:t1:%d", name, n), "spec")
	p.Tenant = "t1"
	return p
}

// jobsOfKind counts the jobs of kind in tenant t1.
func jobsOfKind(t *testing.T, s store.Store, kind string) int {
	t.Helper()
	n, err := countKind(t, s, kind)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countKind counts the jobs of kind in tenant t1 (for goroutines other
// than the test's).
func countKind(t *testing.T, s store.Store, kind string) (int, error) {
	n := 0
	var cursor int64
	for {
		jobs, next, err := s.JobList(t.Context(), &store.JobListParams{Filter: store.JobFilter{Tenant: "t1", Kind: kind}, Limit: 500, Cursor: cursor})
		if err != nil {
			return 0, fmt.Errorf("JobList: %w", err)
		}
		n += len(jobs)
		if next == 0 {
			return n, nil
		}
		cursor = next
	}
}

// testScheduleFire: a current schedule's firing creates its job and moves
// the mark in one call; the same firing again is at the mark, so it is
// refused as Stale and writes nothing; a skipped firing moves the mark and
// keeps the job; a manual trigger records its job only.
func testScheduleFire(t *testing.T, s store.Store) {
	read := upsertSchedule(t, s, "t1", "n", `{"every":"1m"}`, at(0))
	res := fire(t, s, read, at(time.Minute), firingJob("n", 1))
	if res.Stale || res.Insert.Err != nil || res.Insert.Job == nil || res.Insert.Existing || !res.Changed {
		t.Fatalf("first firing = %+v, want a new job and the mark moved", res)
	}
	j := mustGet(t, s, res.Insert.Job.ID)
	sc := getSchedule(t, s, "t1", "n")
	if sc.LastFiredAt == nil || !sc.LastFiredAt.Equal(at(time.Minute)) || sc.LastJobID != j.ID {
		t.Errorf("after the firing: last %v job %d, want +1m job %d", sc.LastFiredAt, sc.LastJobID, j.ID)
	}
	// The firing is at the mark now: the same firing again writes nothing.
	again := fire(t, s, read, at(time.Minute), firingJob("n", 1))
	if !again.Stale || again.Insert.Job != nil || again.Changed {
		t.Errorf("the same firing again = %+v, want Stale and nothing written", again)
	}
	if skip := fire(t, s, read, at(2*time.Minute), nil); skip.Stale || skip.Insert.Job != nil || !skip.Changed {
		t.Errorf("skipped firing = %+v, want the mark moved and no job", skip)
	}
	trig := fire(t, s, read, time.Time{}, firingJob("n", 99))
	if trig.Stale || trig.Insert.Job == nil || !trig.Changed {
		t.Fatalf("trigger = %+v", trig)
	}
	sc = getSchedule(t, s, "t1", "n")
	if !sc.LastFiredAt.Equal(at(2*time.Minute)) || sc.LastJobID != trig.Insert.Job.ID {
		t.Errorf("after skip and trigger: last %v job %d, want +2m job %d", sc.LastFiredAt, sc.LastJobID, trig.Insert.Job.ID)
	}
	if n := jobsOfKind(t, s, "fire-n"); n != 2 {
		t.Errorf("%d jobs, want 2 (the firing and the trigger)", n)
	}
}

// testScheduleFireStale: a firing computed from a schedule that was then
// deleted, replaced with another spec (later, or at the same instant), or
// deleted and put back, makes no job and records nothing — nor does its
// skipped firing or trigger. (A put of the same spec does not make a read
// stale: testScheduleUnchangedPut.)
func testScheduleFireStale(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, c := range []struct {
		name   string
		change func(name string)
	}{
		{"deleted", func(name string) {
			if err := s.ScheduleDelete(ctx, &store.ScheduleGetParams{Tenant: "t1", Name: name}); err != nil {
				t.Fatal(err)
			}
		}},
		{"updated", func(name string) { upsertSchedule(t, s, "t1", name, `{"every":"5m"}`, at(time.Second)) }},
		{"updated at the same instant", func(name string) { upsertSchedule(t, s, "t1", name, `{"every":"5m"}`, at(0)) }},
		{"deleted and put back", func(name string) {
			if err := s.ScheduleDelete(ctx, &store.ScheduleGetParams{Tenant: "t1", Name: name}); err != nil {
				t.Fatal(err)
			}
			upsertSchedule(t, s, "t1", name, `{"every":"1m"}`, at(time.Second))
		}},
	} {
		name := fmt.Sprintf("stale-%d", i)
		read := upsertSchedule(t, s, "t1", name, `{"every":"1m"}`, at(0))
		c.change(name)
		for _, f := range []struct {
			what string
			when time.Time
			job  *store.JobInsertParams
		}{
			{"firing", at(time.Minute), firingJob(name, 1)},
			{"skipped firing", at(2 * time.Minute), nil},
			{"trigger", time.Time{}, firingJob(name, 2)},
		} {
			if res := fire(t, s, read, f.when, f.job); !res.Stale || res.Insert.Job != nil || res.Changed {
				t.Errorf("%s: %s = %+v, want Stale and nothing written", c.name, f.what, res)
			}
		}
		if n := jobsOfKind(t, s, "fire-"+name); n != 0 {
			t.Errorf("%s: the stale firings made %d jobs, want 0", c.name, n)
		}
		if sc, err := s.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: "t1", Name: name}); err == nil && (sc.LastFiredAt != nil || sc.LastJobID != 0) {
			t.Errorf("%s: the stale firings recorded last %v job %d", c.name, sc.LastFiredAt, sc.LastJobID)
		}
		// The schedule as it is now fires.
		if now, err := s.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: "t1", Name: name}); err == nil {
			if res := fire(t, s, now, at(time.Minute), firingJob(name, 1)); res.Stale || res.Insert.Job == nil {
				t.Errorf("%s: firing the current schedule = %+v", c.name, res)
			}
		}
	}
}

// testScheduleFireRefused: a firing whose job the store refuses (its key
// holds a job of another fingerprint) reports the error and records
// nothing.
func testScheduleFireRefused(t *testing.T, s store.Store) {
	read := upsertSchedule(t, s, "t1", "r", `{}`, at(0))
	other := firingJob("r", 1)
	other.Fingerprint = hash("another spec")
	insert1(t, s, at(0), other)
	res := fire(t, s, read, at(time.Minute), firingJob("r", 1))
	var reused *idemtype.KeyReusedError
	if res.Stale || !errors.As(res.Insert.Err, &reused) || res.Changed {
		t.Errorf("firing onto a reused key = %+v, want a KeyReusedError and no change", res)
	}
	if sc := getSchedule(t, s, "t1", "r"); sc.LastFiredAt != nil || sc.LastJobID != 0 {
		t.Errorf("a refused firing recorded last %v job %d", sc.LastFiredAt, sc.LastJobID)
	}
}

// testScheduleFireRaceDelete: schedulers keep firing a schedule they read
// (each firing a new key, their times interleaved, so the ones a faster
// scheduler's mark overtook are refused) while it is deleted. Every firing that succeeded
// committed before the delete: the jobs counted once the delete returned
// are all there will ever be, and each successful firing made one.
func testScheduleFireRaceDelete(t *testing.T, s store.Store) {
	const schedulers, attempts = 4, 100
	ctx := t.Context()
	read := upsertSchedule(t, s, "t1", "race", `{"every":"1m"}`, at(0))
	firstFired := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	errs := make(chan error, schedulers+1)
	for g := range schedulers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range attempts {
				res, err := s.ScheduleFire(ctx, &store.ScheduleFireParams{Read: read, At: at(time.Duration(i*schedulers+g+1) * time.Second),
					Job: firingJob("race", g*attempts+i), Now: at(0)})
				if err != nil {
					errs <- err
					return
				}
				if res.Stale {
					// Deleted, or another scheduler fired a later
					// time first (the mark): nothing written.
					continue
				}
				if res.Insert.Job == nil || res.Insert.Existing {
					errs <- fmt.Errorf("firing %d/%d = %+v, want a new job", g, i, res)
					return
				}
				mu.Lock()
				fired++
				mu.Unlock()
				once.Do(func() { close(firstFired) })
			}
		}()
	}
	firersDone := make(chan struct{})
	afterDelete := -1
	deleted := make(chan struct{})
	go func() {
		defer close(deleted)
		select {
		case <-firstFired:
		case <-firersDone:
			return // no firing succeeded: reported below
		}
		if err := s.ScheduleDelete(ctx, &store.ScheduleGetParams{Tenant: "t1", Name: "race"}); err != nil {
			errs <- err
			return
		}
		n, err := countKind(t, s, "fire-race")
		if err != nil {
			errs <- err
			return
		}
		afterDelete = n
	}()
	wg.Wait()
	close(firersDone)
	<-deleted
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if afterDelete < 0 {
		t.Fatal("no firing succeeded before the delete")
	}
	end := jobsOfKind(t, s, "fire-race")
	if end != afterDelete {
		t.Errorf("%d jobs once the delete returned, %d at the end: %d firings of the deleted schedule made jobs after it", afterDelete, end, end-afterDelete)
	}
	if end != fired {
		t.Errorf("%d successful firings made %d jobs", fired, end)
	}
	if fired == schedulers*attempts {
		t.Errorf("all %d firings succeeded: none ran after the delete", fired)
	}
}
