package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

func scheduleMarkCases() []testCase {
	return []testCase{
		{"Schedules/fire at or before the mark makes no job", testScheduleFireBehindMark},
		{"Schedules/fires racing for one slot and older ones make one job per slot", testScheduleFireRaceMark},
		{"Schedules/an unchanged put keeps a read schedule current", testScheduleUnchangedPut},
	}
}

// markJob is the job of a firing of schedule name at slot n made by
// scheduler g, with a key of its own: a firing whose key no longer blocks
// (its dedup window ended, or the slot was skipped and never had a job),
// so only the schedule's mark can keep it from making a second job.
func markJob(name string, g, n int) *store.JobInsertParams {
	p := keyed("fire-"+name, fmt.Sprintf("§%s:t1:%d:%d", name, n, g), "spec")
	p.Tenant = "t1"
	return p
}

// testScheduleFireBehindMark: once a schedule's mark is at a firing time,
// a firing at that time or before it — a stale scheduler's, computed from
// an older read of the same definition — is refused as Stale: no job, the
// mark and last job unchanged, whether it has a job or is a skipped
// firing. A later firing and a manual trigger (not subject to the mark)
// still make their jobs.
func testScheduleFireBehindMark(t *testing.T, s store.Store) {
	read := upsertSchedule(t, s, "t1", "mark", `{"every":"1m"}`, at(0))
	first := fire(t, s, read, at(2*time.Minute), markJob("mark", 0, 2))
	if first.Stale || first.Insert.Job == nil || !first.Changed {
		t.Fatalf("firing at +2m = %+v, want a job and the mark moved", first)
	}
	for _, f := range []struct {
		what string
		when time.Time
		job  *store.JobInsertParams
	}{
		{"the same slot again", at(2 * time.Minute), markJob("mark", 1, 2)},
		{"an older slot", at(time.Minute), markJob("mark", 1, 1)},
		{"an older slot skipped", at(time.Minute), nil},
		{"the same slot skipped", at(2 * time.Minute), nil},
	} {
		if res := fire(t, s, read, f.when, f.job); !res.Stale || res.Insert.Job != nil || res.Changed {
			t.Errorf("%s = %+v, want Stale and nothing written", f.what, res)
		}
	}
	sc := getSchedule(t, s, "t1", "mark")
	if sc.LastFiredAt == nil || !sc.LastFiredAt.Equal(at(2*time.Minute)) || sc.LastJobID != first.Insert.Job.ID {
		t.Errorf("after the refused firings: last %v job %d, want +2m job %d", sc.LastFiredAt, sc.LastJobID, first.Insert.Job.ID)
	}
	if n := jobsOfKind(t, s, "fire-mark"); n != 1 {
		t.Errorf("%d jobs, want 1: the firings at or before the mark made jobs", n)
	}
	trig := fire(t, s, read, time.Time{}, markJob("mark", 9, 0))
	if trig.Stale || trig.Insert.Job == nil || trig.Insert.Existing {
		t.Errorf("manual trigger after the mark = %+v, want a new job", trig)
	}
	next := fire(t, s, read, at(3*time.Minute), markJob("mark", 0, 3))
	if next.Stale || next.Insert.Job == nil || !next.Changed {
		t.Errorf("firing at +3m = %+v, want a job and the mark moved", next)
	}
	if n := jobsOfKind(t, s, "fire-mark"); n != 3 {
		t.Errorf("%d jobs, want 3 (+2m, the trigger, +3m)", n)
	}
}

// testScheduleFireRaceMark: in each round, schedulers fire the round's
// slot at once (each with a key of its own) while others fire the two
// slots before it and skip an older one, all from one read of the
// schedule. Exactly one firing of each slot makes a job, no firing of a
// slot at or before the mark does, and the mark ends at the last slot.
func testScheduleFireRaceMark(t *testing.T, s store.Store) {
	const schedulers, rounds = 4, 15
	ctx := t.Context()
	read := upsertSchedule(t, s, "t1", "racemark", `{"every":"1m"}`, at(0))
	made := map[int]int{} // slot → firings that made a job
	for r := 1; r <= rounds; r++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := make(chan error, 3*schedulers)
		for g := range schedulers {
			for _, slot := range []int{r, r - 1, r - 2} {
				if slot < 1 {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					job := markJob("racemark", g, slot)
					if slot == r-2 && g%2 == 1 {
						job = nil // a skipped firing of an older slot
					}
					res, err := s.ScheduleFire(ctx, &store.ScheduleFireParams{Read: read, At: at(time.Duration(slot) * time.Minute), Job: job, Now: at(0)})
					if err != nil {
						errs <- fmt.Errorf("round %d, scheduler %d, slot %d: %w", r, g, slot, err)
						return
					}
					if res.Insert.Err != nil {
						errs <- fmt.Errorf("round %d, scheduler %d, slot %d: %w", r, g, slot, res.Insert.Err)
						return
					}
					if res.Insert.Job != nil {
						mu.Lock()
						made[slot]++
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if sc := getSchedule(t, s, "t1", "racemark"); sc.LastFiredAt == nil || !sc.LastFiredAt.Equal(at(time.Duration(r)*time.Minute)) {
			t.Fatalf("round %d: mark %v, want +%dm", r, sc.LastFiredAt, r)
		}
	}
	for slot := 1; slot <= rounds; slot++ {
		if made[slot] != 1 {
			t.Errorf("slot %d made %d jobs, want 1", slot, made[slot])
		}
	}
	if n := jobsOfKind(t, s, "fire-racemark"); n != rounds {
		t.Errorf("%d jobs stored, want %d (one per slot)", n, rounds)
	}
}

// testScheduleUnchangedPut: putting a schedule again with the definition
// it has (the same spec) does not make a firing computed from an earlier
// read stale; a put with another spec does, and a put back to the read
// spec makes it current again (the check compares the definition, not
// when it was put).
func testScheduleUnchangedPut(t *testing.T, s store.Store) {
	read := upsertSchedule(t, s, "t1", "same", `{"every":"1m"}`, at(0))
	again := upsertSchedule(t, s, "t1", "same", `{"every":"1m"}`, at(time.Second))
	if !again.CreatedAt.Equal(at(0)) {
		t.Errorf("unchanged put: created %v, want the first put's", again.CreatedAt)
	}
	if res := fire(t, s, read, at(time.Minute), firingJob("same", 1)); res.Stale || res.Insert.Job == nil || !res.Changed {
		t.Errorf("firing read before an unchanged put = %+v, want a job and the mark moved", res)
	}
	upsertSchedule(t, s, "t1", "same", `{"every":"5m"}`, at(2*time.Second))
	if res := fire(t, s, read, at(2*time.Minute), firingJob("same", 2)); !res.Stale || res.Insert.Job != nil {
		t.Errorf("firing read before a changed put = %+v, want Stale and no job", res)
	}
	upsertSchedule(t, s, "t1", "same", `{"every":"1m"}`, at(3*time.Second))
	if res := fire(t, s, read, at(2*time.Minute), firingJob("same", 2)); res.Stale || res.Insert.Job == nil {
		t.Errorf("firing read before a put back to its definition = %+v, want a job", res)
	}
	if n := jobsOfKind(t, s, "fire-same"); n != 2 {
		t.Errorf("%d jobs, want 2", n)
	}
}
