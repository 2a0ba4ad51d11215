package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// retryOrderCases: a retried job keeps the order its partition and its
// dependencies impose (JobRetryMany, JobClaim), a batch keeps its jobs
// (BatchCreate) and a rescue into dead moves RunAt (JobRescue).
func retryOrderCases() []testCase {
	return []testCase{
		{"JobRetryMany/partition_head_waits_for_running_successor", testRetryHeadWaitsForSuccessor},
		{"JobRetryMany/dependant_waits_for_its_dependency", testRetryDependantWaits},
		{"JobRetryMany/dependant_takes_insert_state", testRetryDependantInsertState},
		{"Race/retried_partition_heads_never_run_beside_successors", testRaceRetriedHeads},
		{"BatchCreate/existing_keyed_job_stays_in_its_batch", testBatchExistingJobKeepsBatch},
		{"JobRescue/dead_run_at_is_now", testRescueDeadRunAt},
	}
}

// retryIDs retries ids at now and returns the moved rows.
func retryIDs(t *testing.T, s store.Store, now time.Time, ids ...int64) []*idemtype.JobRow {
	t.Helper()
	rows, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: ids, Now: now})
	if err != nil {
		t.Fatalf("JobRetryMany(%v): %v", ids, err)
	}
	if len(rows) != len(ids) {
		t.Fatalf("JobRetryMany(%v) moved %v", ids, sortedIDs(rows))
	}
	return rows
}

func sortedIDs(js []*idemtype.JobRow) []int64 { return sorted(ids(js)) }

// testRetryHeadWaitsForSuccessor: a partition head that died (or was
// cancelled) is retried while its successor runs; no claim takes it until
// the successor finishes, and then it goes before the partition's other
// waiting jobs.
func testRetryHeadWaitsForSuccessor(t *testing.T, s store.Store) {
	for _, how := range []idemtype.JobState{idemtype.StateDead, idemtype.StateCancelled} {
		t.Run(string(how), func(t *testing.T) {
			part := "p-" + string(how)
			var ps []*store.JobInsertParams
			for _, k := range []string{"a", "b", "c"} {
				p := newJob(k)
				p.PartitionKey = part
				ps = append(ps, p)
			}
			js := insertNew(t, s, at(0), ps...)
			if how == idemtype.StateDead {
				c := claim(t, s, at(time.Second), 10)
				wantIDs(t, "first claim", ids(c), []int64{js[0].ID})
				finishAs(t, s, c[0], idemtype.StateDead, at(2*time.Second))
			} else {
				cancelJob(t, s, js[0], at(2*time.Second))
			}
			c := claim(t, s, at(3*time.Second), 10)
			wantIDs(t, "claim after the head ended", ids(c), []int64{js[1].ID})
			if len(c) != 1 {
				t.FailNow()
			}
			succ := c[0]

			rows := retryIDs(t, s, at(4*time.Second), js[0].ID)
			if rows[0].State != idemtype.StateAvailable {
				t.Errorf("retried head state %s, want available", rows[0].State)
			}
			wantIDs(t, "claim while the successor runs", ids(claim(t, s, at(5*time.Second), 10)), nil)

			finishAs(t, s, succ, idemtype.StateCompleted, at(6*time.Second))
			c = claim(t, s, at(7*time.Second), 10)
			wantIDs(t, "claim after the successor finished", ids(c), []int64{js[0].ID})
			if len(c) != 1 {
				t.FailNow()
			}
			wantIDs(t, "claim while the retried head runs", ids(claim(t, s, at(8*time.Second), 10)), nil)
			finishAs(t, s, c[0], idemtype.StateCompleted, at(9*time.Second))
			wantIDs(t, "claim after the retried head finished", ids(claim(t, s, at(10*time.Second), 10)),
				[]int64{js[2].ID})
		})
	}
}

// testRetryDependantWaits: a pending dependant cancelled by hand and then
// retried goes back to pending while its dependency has not run; the
// dependency's completion releases it.
func testRetryDependantWaits(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	pb := newJob("b")
	pb.DependsOn = []int64{a.ID}
	b := insert1(t, s, at(0), pb)
	if b.State != idemtype.StatePending {
		t.Fatalf("dependant state %s, want pending", b.State)
	}
	cancelJob(t, s, b, at(time.Second))
	rows := retryIDs(t, s, at(2*time.Second), b.ID)
	if rows[0].State != idemtype.StatePending {
		t.Errorf("retried dependant state %s, want pending", rows[0].State)
	}
	if rows[0].FinishedAt != nil || rows[0].Attempt != 0 {
		t.Errorf("retried dependant: finished_at %v attempt %d, want none and 0", rows[0].FinishedAt, rows[0].Attempt)
	}
	wantState(t, s, b.ID, idemtype.StatePending)
	c := claim(t, s, at(3*time.Second), 10)
	wantIDs(t, "claim with the dependant pending", ids(c), []int64{a.ID})
	finishAs(t, s, c[0], idemtype.StateCompleted, at(4*time.Second))
	wantState(t, s, b.ID, idemtype.StateAvailable)
	wantIDs(t, "claim after the dependency completed", ids(claim(t, s, at(5*time.Second), 10)), []int64{b.ID})
}

// testRetryDependantInsertState: a retried dependant takes the state an
// insert would give it now: cancelled again when a dependency is dead
// (available when it waits for any outcome), available when all are
// completed, and pending while one is unfinished even if another is dead
// and it waits for any outcome.
func testRetryDependantInsertState(t *testing.T, s store.Store) {
	done := insert1(t, s, at(0), newJob("done"))
	completeJob(t, s, done, at(time.Second), `1`)
	dead := killJob(t, s, insert1(t, s, at(0), newJob("dead")), at(2*time.Second))
	open := insert1(t, s, at(0), newJob("open"))

	dep := func(kind string, any bool, on ...int64) *idemtype.JobRow {
		p := newJob(kind)
		p.DependsOn, p.DependsOnFinished = on, any
		j := insert1(t, s, at(3*time.Second), p)
		if !j.State.Finished() {
			j = cancelJob(t, s, j, at(4*time.Second))
		}
		return j
	}
	onDead := dep("on-dead", false, done.ID, dead.ID)
	onDeadAny := dep("on-dead-any", true, done.ID, dead.ID)
	onDone := dep("on-done", false, done.ID)
	onOpenAny := dep("on-open-any", true, dead.ID, open.ID)

	now := at(5 * time.Second)
	rows := retryIDs(t, s, now, onDead.ID, onDeadAny.ID, onDone.ID, onOpenAny.ID)
	got := map[int64]*idemtype.JobRow{}
	for _, r := range rows {
		got[r.ID] = r
	}
	for _, w := range []struct {
		j    *idemtype.JobRow
		want idemtype.JobState
	}{
		{onDead, idemtype.StateCancelled},
		{onDeadAny, idemtype.StateAvailable},
		{onDone, idemtype.StateAvailable},
		{onOpenAny, idemtype.StatePending},
	} {
		r := got[w.j.ID]
		if r == nil || r.State != w.want {
			t.Errorf("retried %s: %+v, want state %s", w.j.Kind, r, w.want)
			continue
		}
		wantState(t, s, w.j.ID, w.want)
	}
	if r := got[onDead.ID]; r != nil && r.State == idemtype.StateCancelled {
		wantTimeP(t, "re-cancelled dependant finished_at", r.FinishedAt, now)
		wantMentions(t, "re-cancelled dependant last_error", r.LastError, dead.ID, "dead")
	}
	for _, r := range []*idemtype.JobRow{got[onDeadAny.ID], got[onDone.ID]} {
		if r != nil && r.FinishedAt != nil {
			t.Errorf("retried job %d finished_at %v, want none", r.ID, r.FinishedAt)
		}
	}
	// The unfinished dependency's end releases the deps_any dependant.
	cancelJob(t, s, open, at(6*time.Second))
	wantState(t, s, onOpenAny.ID, idemtype.StateAvailable)
}

// testRaceRetriedHeads: claimers drain FIFO partitions whose heads died
// while a retrier requeues each dead head as soon as a successor of its
// partition runs. No claim may return a job of a partition while another
// job of it runs, every job runs, and each partition runs its jobs in id
// order apart from the retried head, which runs once, after the
// successor that was running when it was retried. Overlap: 4 claimers
// released together with the retrier; a successor keeps running until its
// head is retried, then 5ms more while the other claimers keep claiming.
func testRaceRetriedHeads(t *testing.T, s store.Store) {
	const parts, perPart = 6, 6
	var ps []*store.JobInsertParams
	for i := range perPart + 1 {
		for p := range parts {
			j := newJob("k")
			j.PartitionKey = fmt.Sprint("p", p)
			j.Priority = i % 2 // the retried head may be outranked
			ps = append(ps, j)
		}
	}
	js := insertNew(t, s, at(0), ps...)
	heads := map[string]int64{}
	for _, j := range js[:parts] {
		heads[j.PartitionKey] = j.ID
	}
	c := claim(t, s, at(time.Second), 2*parts)
	wantIDSet(t, "heads claimed", ids(c), ids(js[:parts]))
	for _, j := range c {
		finishAs(t, s, j, idemtype.StateDead, at(2*time.Second))
	}

	rec := newPartitionLog()
	var (
		// Under rec.mu: the heads retried, and the job running when each was.
		retried = map[string]bool{}
		heldAt  = map[string]int64{}
		// changed wakes the retrier when a job of a partition was claimed
		// or finished; retriedCh[k] closes when k's head is retried.
		changed   = make(chan struct{}, 1)
		retriedCh = map[string]chan struct{}{}
	)
	for p := range parts {
		retriedCh[fmt.Sprint("p", p)] = make(chan struct{})
	}
	wake := func() {
		select {
		case changed <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	total := parts * (perPart + 1) // every successor, and every head once retried
	claimNow := at(time.Hour)
	deadline := time.Now().Add(90 * time.Second)
	timeout := time.NewTimer(90 * time.Second)
	defer timeout.Stop()
	err := parallel(5, func(g int) error {
		if g == 0 { // the retrier
			for n := 0; n < parts; {
				if time.Now().After(deadline) {
					return fmt.Errorf("%d of %d heads retried", n, parts)
				}
				key := ""
				rec.mu.Lock()
				for p := range parts {
					k := fmt.Sprint("p", p)
					if _, runs := rec.running[k]; !retried[k] && (runs || len(rec.order[k]) == perPart) {
						key = k
						break
					}
				}
				rec.mu.Unlock()
				if key == "" {
					select {
					case <-changed:
					case <-timeout.C:
						return fmt.Errorf("%d of %d heads retried", n, parts)
					}
					continue
				}
				rows, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{heads[key]},
					FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(time.Minute)})
				if err != nil {
					return err
				}
				if len(rows) != 1 {
					return fmt.Errorf("retry of head %d moved %d jobs", heads[key], len(rows))
				}
				rec.mu.Lock()
				retried[key] = true
				heldAt[key] = rec.running[key]
				rec.mu.Unlock()
				close(retriedCh[key])
				n++
			}
			return nil
		}
		for {
			n := rec.finished()
			if n == total {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("partitions did not drain (%d of %d jobs done)", n, total)
			}
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 2, LeaseUntil: claimNow.Add(time.Hour), Now: claimNow})
			if err != nil {
				return err
			}
			rec.claimed(jobs)
			if len(jobs) > 0 {
				wake()
			}
			for _, j := range jobs {
				// A successor runs until its partition's head is retried,
				// and a little longer when it ran at the retry, so that
				// other claims meet the retried head beside it.
				select {
				case <-retriedCh[j.PartitionKey]:
				case <-time.After(time.Until(deadline)):
					return fmt.Errorf("head of partition %s never retried", j.PartitionKey)
				}
				rec.mu.Lock()
				held := heldAt[j.PartitionKey] == j.ID
				rec.mu.Unlock()
				if held {
					time.Sleep(5 * time.Millisecond) // simulates work while the others claim
				}
				if err := rec.finish(t, s, j, claimNow); err != nil {
					return err
				}
				wake()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rec.bad {
		t.Error(b)
	}
	for key, o := range rec.order {
		if len(o) != perPart+1 {
			t.Errorf("partition %s ran %v, want %d jobs", key, o, perPart+1)
			continue
		}
		var rest []int64
		seen := 0
		for i, id := range o {
			if id == heads[key] {
				seen++
				if i == 0 {
					t.Errorf("partition %s ran its retried head %d first: %v", key, id, o)
				}
				continue
			}
			rest = append(rest, id)
		}
		if seen != 1 {
			t.Errorf("partition %s ran its head %d %d times: %v", key, heads[key], seen, o)
		}
		for i := 1; i < len(rest); i++ {
			if rest[i] <= rest[i-1] {
				t.Errorf("partition %s ran its successors out of order: %v", key, o)
				break
			}
		}
	}
}

// testBatchExistingJobKeepsBatch: a batch item whose key dedups onto a job
// of an earlier batch gets that job (Existing), which stays in its batch.
func testBatchExistingJobKeepsBatch(t *testing.T, s store.Store) {
	a, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "batch-a",
		Jobs: []*store.JobInsertParams{keyed("k", "key-1", "fp"), newJob("x")}, Now: at(0)})
	if err != nil {
		t.Fatalf("BatchCreate a: %v", err)
	}
	b, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "batch-b",
		Jobs: []*store.JobInsertParams{keyed("k", "key-1", "fp"), newJob("y")}, Now: at(time.Second)})
	if err != nil {
		t.Fatalf("BatchCreate b: %v", err)
	}
	if !b.Jobs[0].Existing || b.Jobs[0].Job.ID != a.Jobs[0].Job.ID {
		t.Fatalf("batch b's keyed item: existing %v job %d, want batch a's job %d", b.Jobs[0].Existing,
			b.Jobs[0].Job.ID, a.Jobs[0].Job.ID)
	}
	wantIDSet(t, "batch a's jobs", ids(listAll(t, s, store.JobFilter{BatchID: a.Batch.ID})),
		[]int64{a.Jobs[0].Job.ID, a.Jobs[1].Job.ID})
	wantIDSet(t, "batch b's jobs", ids(listAll(t, s, store.JobFilter{BatchID: b.Batch.ID})),
		[]int64{b.Jobs[1].Job.ID})
}

// testRescueDeadRunAt: a job whose lease expired at its last attempt is
// rescued into dead with RunAt = Now, as a retryable one is.
func testRescueDeadRunAt(t *testing.T, s store.Store) {
	p := newJob("last")
	p.MaxAttempts = 1
	j := insert1(t, s, at(0), p)
	claim(t, s, at(time.Second), 1)
	now := at(time.Hour)
	got, err := s.JobRescue(t.Context(), &store.JobRescueParams{Now: now})
	if err != nil {
		t.Fatalf("JobRescue: %v", err)
	}
	wantIDs(t, "rescued", rescuedIDs(got), []int64{j.ID})
	r := wantState(t, s, j.ID, idemtype.StateDead)
	wantTime(t, "rescued dead job run_at", r.RunAt, now)
	wantTimeP(t, "rescued dead job finished_at", r.FinishedAt, now)
}
