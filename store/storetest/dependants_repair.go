package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// dependantsRepairCases: JobDependantsRepair finds the pending jobs whose
// release a finish missed (made here with Raw.RawSetFinal: a dependency's
// row finished or its hold ended without the release, as a node of an
// older version ending a hold does) and applies what that finish would
// have, never earlier, once, within its limit.
func dependantsRepairCases() []testCase {
	return []testCase{
		{"Repair/releases_missed_dependants", testRepairReleases},
		{"Repair/cancels_dependants_of_dead_dependency", testRepairCancels},
		{"Repair/leaves_waiting_dependants_pending", testRepairLeavesWaiting},
		{"Repair/limit_and_cursor", testRepairLimit},
		{"Repair/cursor_within_one_creation_time", testRepairCursorTies},
		{"Repair/concurrent_with_finishes_once_each", testRepairRace},
		{"Cancel/hold_end_by_rescue_announces_dependants_queue", testHoldEndRescueAnnouncesDependants},
		{"Cancel/hold_end_by_acknowledgement_announces_dependants_queue", testHoldEndAckAnnouncesDependants},
	}
}

// repair runs JobDependantsRepair as of now over the jobs created before
// createdBefore, from after.
func repair(t *testing.T, s store.Store, now, createdBefore time.Time, after store.DependantsCursor, limit int) *store.JobDependantsRepairResult {
	t.Helper()
	res, err := s.JobDependantsRepair(t.Context(), &store.JobDependantsRepairParams{Now: now,
		CreatedBefore: createdBefore, After: after, Limit: limit})
	if err != nil {
		t.Fatalf("JobDependantsRepair: %v", err)
	}
	return res
}

// testRepairReleases: a dependant of a job completed without its release,
// and one waiting for any outcome of a cancelled job whose hold ended
// without its release, are released by the repair as a finish would:
// available, or scheduled when their run_at is later than the repair's
// Now. Jobs created at or after CreatedBefore (the grace) are not looked at.
func testRepairReleases(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a", "q", ""), partitioned("b", "q", ""))
	a, b := js[0], js[1]
	later := dependsOn("later", a)
	later.RunAt = at(time.Hour)
	deps := insertNew(t, s, at(0), dependsOn("needs-a", a), anyOutcome("after-b", b), later)
	needsA, afterB, laterA := deps[0], deps[1], deps[2]
	claimLease(t, s, a, at(0), at(30*time.Second))
	rawSetFinal(t, s, a.ID, idemtype.StateCompleted, at(time.Second))
	c := claimLease(t, s, b, at(0), at(30*time.Second))
	cancelJob(t, s, c, at(time.Second))
	wantState(t, s, afterB.ID, idemtype.StatePending) // it waits for the hold
	rawSetFinal(t, s, b.ID, idemtype.StateCancelled, at(2*time.Second))
	if res := repair(t, s, at(time.Minute), at(0), store.DependantsCursor{}, 100); len(res.Released)+len(res.Cancelled) != 0 {
		t.Fatalf("repair of jobs created before the grace repaired %v %v", res.Released, res.Cancelled)
	}
	wantState(t, s, needsA.ID, idemtype.StatePending)
	res := repair(t, s, at(time.Minute), at(30*time.Second), store.DependantsCursor{}, 100)
	wantIDSet(t, "released", res.Released, []int64{needsA.ID, afterB.ID, laterA.ID})
	wantIDs(t, "cancelled", res.Cancelled, nil)
	wantState(t, s, needsA.ID, idemtype.StateAvailable)
	wantState(t, s, afterB.ID, idemtype.StateAvailable)
	wantTime(t, "run_at of the scheduled dependant", wantState(t, s, laterA.ID, idemtype.StateScheduled).RunAt, at(time.Hour))
	if res := repair(t, s, at(2*time.Minute), at(time.Minute), store.DependantsCursor{}, 100); len(res.Released)+len(res.Cancelled) != 0 {
		t.Errorf("second repair repaired %v %v", res.Released, res.Cancelled)
	}
	wantIDSet(t, "claimed from the dependants' queues", ids(claim(t, s, at(2*time.Minute), 10, "default", "d")),
		[]int64{needsA.ID, afterB.ID})
}

// testRepairCancels: a job that needs its dependency to complete, whose
// dependency died without cancelling it, is cancelled by the repair as
// the death would have cancelled it: the reason names the dependency, its
// window-0 key stops blocking at the repair's time, its own dependants are
// cancelled (transitively) or, waiting for any outcome, released; a job
// waiting for any outcome of the dead job is released.
func testRepairCancels(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	kp := dependsOn("needs-a", a)
	kp.IdempotencyKey, kp.Fingerprint, kp.DedupWindow, kp.ResultTTL = "K", hash("fp"), 0, time.Hour
	needsA := insert1(t, s, at(0), kp)
	deps := insertNew(t, s, at(0), dependsOn("grand", needsA), anyOutcome("after-needs", needsA), anyOutcome("after-a", a))
	grand, afterNeeds, afterA := deps[0], deps[1], deps[2]
	claimLease(t, s, a, at(0), at(30*time.Second))
	rawSetFinal(t, s, a.ID, idemtype.StateDead, at(time.Second))
	if r := insertAll(t, s, at(2*time.Second), kp)[0]; !r.Existing || r.Job.ID != needsA.ID {
		t.Fatalf("insert of the pending job's key: %+v, want the existing job %d", r, needsA.ID)
	}
	res := repair(t, s, at(time.Minute), at(30*time.Second), store.DependantsCursor{}, 100)
	wantIDSet(t, "cancelled", res.Cancelled, []int64{needsA.ID, grand.ID})
	if !slices.Contains(res.Released, afterA.ID) {
		t.Errorf("released %v, want %d (waits for any outcome of the dead job) among them", res.Released, afterA.ID)
	}
	j := wantState(t, s, needsA.ID, idemtype.StateCancelled)
	if want := fmt.Sprintf("dependency %d is dead", a.ID); j.LastError != want {
		t.Errorf("last error %q, want %q", j.LastError, want)
	}
	wantTimeP(t, "finished_at of the cancelled dependant", j.FinishedAt, at(time.Minute))
	g := wantState(t, s, grand.ID, idemtype.StateCancelled)
	if want := fmt.Sprintf("dependency %d is cancelled", needsA.ID); g.LastError != want {
		t.Errorf("last error of the transitive dependant %q, want %q", g.LastError, want)
	}
	wantState(t, s, afterNeeds.ID, idemtype.StateAvailable)
	wantState(t, s, afterA.ID, idemtype.StateAvailable)
	r := record(t, s, "default", "K", at(time.Minute-time.Second)) // live until the repair's time
	wantTimeP(t, "DedupUntil of the cancelled dependant's key (window 0)", r.DedupUntil, at(time.Minute))
	if j2 := insert1(t, s, at(2*time.Minute), kp); j2.ID == needsA.ID {
		t.Errorf("window-0 key of the cancelled dependant still blocks")
	}
}

// testRepairLeavesWaiting: the repair releases nothing early: not a
// dependant of a running job, of an available one, nor one waiting for
// any outcome of a cancelled job that still holds its lease (its handler
// may still run), nor one that needs a job to complete when another of
// its dependencies did. Once the hold ends normally, the normal path
// releases and the repair finds nothing.
func testRepairLeavesWaiting(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("run", "q", ""), partitioned("held", "q", ""),
		partitioned("waits", "q", ""), partitioned("done", "q", ""))
	run, held, waits, done := js[0], js[1], js[2], js[3]
	deps := insertNew(t, s, at(0), dependsOn("needs-run", run), anyOutcome("after-held", held),
		dependsOn("needs-waits", waits), dependsOn("needs-done-and-run", done, run), anyOutcome("after-run", run))
	claimLease(t, s, run, at(0), at(time.Hour))
	c := claimLease(t, s, held, at(0), at(time.Hour))
	cancelJob(t, s, c, at(time.Second))
	completeJob(t, s, done, at(0), `1`)
	for _, d := range deps {
		wantState(t, s, d.ID, idemtype.StatePending)
	}
	res := repair(t, s, at(10*time.Minute), at(10*time.Minute), store.DependantsCursor{}, 100)
	if len(res.Released)+len(res.Cancelled) != 0 {
		t.Fatalf("repair released %v and cancelled %v of jobs whose dependencies are not settled", res.Released, res.Cancelled)
	}
	for _, d := range deps {
		wantState(t, s, d.ID, idemtype.StatePending)
	}
	finishAll(t, s, completion(c, `1`, at(11*time.Minute))) // refused: acknowledges the cancel
	wantState(t, s, deps[1].ID, idemtype.StateAvailable)
	if res := repair(t, s, at(12*time.Minute), at(12*time.Minute), store.DependantsCursor{}, 100); len(res.Released)+len(res.Cancelled) != 0 {
		t.Errorf("repair after the normal release repaired %v %v", res.Released, res.Cancelled)
	}
}

// testRepairLimit: a call examines at most Limit pending jobs, oldest
// first from its cursor, and returns where the next resumes (zero once it
// examined fewer than Limit); jobs that still wait count against the
// limit, and the walk reaches the stuck jobs behind them.
func testRepairLimit(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), newJob("run"), newJob("done"))
	run, done := js[0], js[1]
	claimLease(t, s, run, at(0), at(time.Hour))
	w1 := insert1(t, s, at(time.Second), dependsOn("w1", run))
	w2 := insert1(t, s, at(2*time.Second), dependsOn("w2", run))
	var stuck []int64
	for i := range 3 {
		stuck = append(stuck, insert1(t, s, at(time.Duration(3+i)*time.Second), dependsOn(fmt.Sprintf("s%d", i), done)).ID)
	}
	claimLease(t, s, done, at(0), at(time.Hour))
	rawSetFinal(t, s, done.ID, idemtype.StateCompleted, at(10*time.Second))
	now := at(time.Minute)
	res := repair(t, s, now, now, store.DependantsCursor{}, 2)
	wantIDs(t, "released by the first call (it examined the two waiting jobs)", res.Released, nil)
	if res.Next.ID != w2.ID {
		t.Fatalf("first call's cursor %+v, want after job %d", res.Next, w2.ID)
	}
	res = repair(t, s, now, now, res.Next, 2)
	wantIDSet(t, "released by the second call", res.Released, stuck[:2])
	if res.Next.ID != stuck[1] {
		t.Fatalf("second call's cursor %+v, want after job %d", res.Next, stuck[1])
	}
	res = repair(t, s, now, now, res.Next, 2)
	wantIDs(t, "released by the third call", res.Released, stuck[2:])
	if res.Next != (store.DependantsCursor{}) {
		t.Errorf("third call's cursor %+v, want zero (the walk ended)", res.Next)
	}
	res = repair(t, s, now, now, store.DependantsCursor{}, 100)
	wantIDs(t, "released by a new walk", res.Released, nil)
	wantState(t, s, w1.ID, idemtype.StatePending)
	wantState(t, s, w2.ID, idemtype.StatePending)
}

// testRepairCursorTies: the jobs of one insert share its creation time;
// the walk pages through them by id from its cursor, then on to the jobs
// created later, examining each once and skipping none.
func testRepairCursorTies(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), newJob("run"), newJob("done"))
	run, done := js[0], js[1]
	claimLease(t, s, run, at(0), at(time.Hour))
	claimLease(t, s, done, at(0), at(time.Hour))
	group := insertNew(t, s, at(time.Second), dependsOn("w1", run), dependsOn("s1", done), dependsOn("w2", run),
		dependsOn("s2", done), dependsOn("s3", done))
	later := insert1(t, s, at(2*time.Second), dependsOn("s4", done))
	rawSetFinal(t, s, done.ID, idemtype.StateCompleted, at(10*time.Second))
	now := at(time.Minute)
	var cur store.DependantsCursor
	for i, want := range []struct {
		released []int64
		next     int64
	}{
		{[]int64{group[1].ID}, group[1].ID},
		{[]int64{group[3].ID}, group[3].ID},
		{[]int64{group[4].ID, later.ID}, later.ID},
		{nil, 0},
	} {
		res := repair(t, s, now, now, cur, 2)
		wantIDSet(t, fmt.Sprintf("released by call %d", i+1), res.Released, want.released)
		if res.Next.ID != want.next {
			t.Fatalf("call %d: cursor %+v, want after job %d", i+1, res.Next, want.next)
		}
		cur = res.Next
	}
	wantState(t, s, group[0].ID, idemtype.StatePending)
	wantState(t, s, group[2].ID, idemtype.StatePending)
}

// testRepairRace: repairs run concurrently with the finishes of the
// dependencies (completions and deaths) and with each other: every
// dependant ends as its dependencies' outcomes say — released once (no
// two repairs report one job, none both released and cancelled), a
// dependant of a dead job cancelled, never released first — and those
// only the repair could release (their dependency completed without the
// release) are released.
func testRepairRace(t *testing.T, s store.Store) {
	const groups = 24
	var deps, running []*idemtype.JobRow
	for i := range groups {
		deps = append(deps, insert1(t, s, at(0), partitioned(fmt.Sprintf("d%d", i), "q", "")))
	}
	for _, d := range deps {
		running = append(running, claimLease(t, s, d, at(0), at(time.Hour)))
	}
	held := insert1(t, s, at(0), partitioned("held", "q", ""))
	claimLease(t, s, held, at(0), at(time.Hour)) // runs throughout: its dependants wait
	var needs, after []*idemtype.JobRow
	for i, d := range deps {
		js := insertNew(t, s, at(time.Second), dependsOn(fmt.Sprintf("n%d", i), d), anyOutcome(fmt.Sprintf("a%d", i), d))
		needs, after = append(needs, js[0]), append(after, js[1])
	}
	waiting := insertNew(t, s, at(time.Second), dependsOn("w-held", held), anyOutcome("a-held", held))
	// Even groups: completed without the release (only a repair releases
	// them). Odd groups: finished concurrently with the repairs,
	// completed (i%4 == 1) or dead (i%4 == 3).
	for i := 0; i < groups; i += 2 {
		rawSetFinal(t, s, deps[i].ID, idemtype.StateCompleted, at(2*time.Second))
	}
	now := at(time.Hour)
	var mu sync.Mutex
	released, cancelled := map[int64]int{}, map[int64]int{}
	var wg sync.WaitGroup
	finishing := make(chan struct{})
	errs := make(chan error, 64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cur store.DependantsCursor
			for round := 0; ; round++ {
				select {
				case <-finishing:
					if round > 0 {
						return
					}
				default:
				}
				res, err := s.JobDependantsRepair(t.Context(), &store.JobDependantsRepairParams{Now: now,
					CreatedBefore: now, After: cur, Limit: 7})
				if err != nil {
					errs <- err
					return
				}
				cur = res.Next
				mu.Lock()
				for _, id := range res.Released {
					released[id]++
				}
				for _, id := range res.Cancelled {
					cancelled[id]++
				}
				mu.Unlock()
			}
		}()
	}
	var fw sync.WaitGroup
	for i := 1; i < groups; i += 2 {
		fw.Add(1)
		go func() {
			defer fw.Done()
			p := completion(running[i], `1`, at(3*time.Second))
			if i%4 == 3 {
				p = failure(running[i], idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(3*time.Second))
			}
			out, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{p})
			if err == nil {
				err = out[0]
			}
			if err != nil {
				errs <- fmt.Errorf("finish of job %d: %w", p.ID, err)
			}
		}()
	}
	fw.Wait()
	close(finishing)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A last walk repairs what the walks in flight had passed by.
	res := repair(t, s, now, now, store.DependantsCursor{}, 1000)
	for _, id := range res.Released {
		released[id]++
	}
	for _, id := range res.Cancelled {
		cancelled[id]++
	}
	for id, n := range released {
		if n != 1 || cancelled[id] != 0 {
			t.Errorf("job %d released %d times and cancelled %d times by repairs", id, n, cancelled[id])
		}
	}
	for id, n := range cancelled {
		t.Errorf("job %d cancelled %d times by repairs: no dependency was left dead without its cancel", id, n)
	}
	for i := range deps {
		wantNeeds := idemtype.StateAvailable
		if i%4 == 3 {
			wantNeeds = idemtype.StateCancelled
		}
		wantState(t, s, needs[i].ID, wantNeeds)
		wantState(t, s, after[i].ID, idemtype.StateAvailable)
		if i%2 == 0 && (released[needs[i].ID] != 1 || released[after[i].ID] != 1) {
			t.Errorf("group %d: the dependants of a job completed without their release were released %d and %d times by repairs, want once",
				i, released[needs[i].ID], released[after[i].ID])
		}
	}
	for _, w := range waiting {
		wantState(t, s, w.ID, idemtype.StatePending)
	}
}

// testHoldEndRescueAnnouncesDependants: the rescuer ending a cancelled
// job's hold releases its dependants that wait for any outcome and
// announces their queue (another queue than the job's), as an insert is,
// so a long-polling claim of that queue wakes at once.
func testHoldEndRescueAnnouncesDependants(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), partitioned("a", "q", ""))
	afterA := insert1(t, s, at(0), anyOutcome("after-a", a))
	c := claimLease(t, s, a, at(0), at(30*time.Second))
	cancelJob(t, s, c, at(time.Second))
	ch := announcements(t, s)
	rescue(t, s, at(time.Minute), 100)
	wantState(t, s, afterA.ID, idemtype.StateAvailable)
	wantAnnounced(t, ch, "d", "the rescuer ended the hold, releasing a dependant of queue d")
}

// testHoldEndAckAnnouncesDependants: the refused finish that acknowledges
// a cancel releases the job's dependants that wait for any outcome and
// announces their queue.
func testHoldEndAckAnnouncesDependants(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), partitioned("a", "q", ""))
	afterA := insert1(t, s, at(0), anyOutcome("after-a", a))
	c := claimLease(t, s, a, at(0), at(time.Hour))
	cancelJob(t, s, c, at(time.Second))
	ch := announcements(t, s)
	finishAll(t, s, completion(c, `1`, at(2*time.Second)))
	wantState(t, s, afterA.ID, idemtype.StateAvailable)
	wantAnnounced(t, ch, "d", "the cancel was acknowledged, releasing a dependant of queue d")
}
