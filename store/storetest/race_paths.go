package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// racePathCases race the lease and state paths that the claim and key
// races (race.go) do not: cancels against finishes, rescuers against late
// finishes, heartbeats and claims, requeues against claims, dependency
// releases against claims, and keyed events.
func racePathCases() []testCase {
	return []testCase{
		{"Race/cancel_against_finish_one_winner", testRaceCancelFinish},
		{"Race/rescuers_late_finishes_and_claimers_take_each_job_once", testRaceRescueClaims},
		{"Race/heartbeat_against_rescue_one_winner", testRaceHeartbeatRescue},
		{"Race/requeues_against_claims_run_each_job_once", testRaceRetryClaims},
		{"Race/dependants_released_once_against_claims", testRaceDependantRelease},
		{"Race/one_event_key_32_concurrent_inserts", testRaceEventKey},
		{"Race/fair_claims_of_many_tenants_take_each_job_once", testRaceFairClaims},
	}
}

// claimSet counts, under mu, how many times claims returned each job.
type claimSet struct {
	mu   sync.Mutex
	seen map[int64]int
	rows map[int64]*idemtype.JobRow
}

func newClaimSet() *claimSet {
	return &claimSet{seen: map[int64]int{}, rows: map[int64]*idemtype.JobRow{}}
}

// add records jobs one claim returned.
func (c *claimSet) add(jobs []*idemtype.JobRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range jobs {
		c.seen[j.ID]++
		c.rows[j.ID] = j
	}
}

// claimAll claims every claimable job of the default queue at now and
// fails unless there are exactly n.
func claimAll(t *testing.T, s store.Store, n int, now, until time.Time) []*idemtype.JobRow {
	t.Helper()
	var out []*idemtype.JobRow
	for {
		got := claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w0",
			Limit: 100, LeaseUntil: until, Now: now})
		if len(got) == 0 {
			break
		}
		out = append(out, got...)
	}
	if len(out) != n {
		t.Fatalf("claimed %d jobs, want %d", len(out), n)
	}
	return out
}

// claimUntilDone claims jobs of the default queue at now (Limit 7) in a
// loop and records them in set, until a claim that started after done
// reported true comes back empty: every write the other goroutines made
// had committed before that claim, so nothing claimable is left behind.
func claimUntilDone(s store.Store, t *testing.T, g int, set *claimSet, done func() bool, now time.Time) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		finished := done()
		jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
			WorkerID: fmt.Sprint("c", g), Limit: 7, LeaseUntil: now.Add(time.Hour), Now: now})
		if err != nil {
			return err
		}
		set.add(jobs)
		if finished && len(jobs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("claims did not drain")
		}
	}
}

// testRaceCancelFinish: 64 running keyed jobs, each with a dependant; for
// each job a JobCancel and a completing JobFinishMany race. Overlap: the
// 128 goroutines wait on parallel's start barrier and are released
// together. Exactly one of each pair wins: the job is completed (the
// cancel is ErrWrongState, the record holds the result, the dependant is
// released) or cancelled (the finish is ErrLeaseLost, the record reads
// failed, the dependant is cancelled), and the job has one attempt.
func testRaceCancelFinish(t *testing.T, s store.Store) {
	const n = 64
	var ps []*store.JobInsertParams
	for i := range n {
		ps = append(ps, keyed("k", fmt.Sprint("K", i), "fp"))
	}
	parents := insertNew(t, s, at(0), ps...)
	for i, p := range parents {
		d := newJob("dependant")
		d.DependsOn = []int64{p.ID}
		ps[i] = d
	}
	deps := insertNew(t, s, at(0), ps...)
	running := claimAll(t, s, n, at(time.Second), at(time.Hour))
	byID := map[int64]*idemtype.JobRow{}
	for _, j := range running {
		byID[j.ID] = j
	}
	var cancelled, completed [n]atomic.Bool
	err := parallel(2*n, func(g int) error {
		i := g / 2
		j := byID[parents[i].ID]
		if g%2 == 0 {
			_, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: j.ID, Reason: "stop", Now: at(2 * time.Second)})
			if errors.Is(err, idemtype.ErrWrongState) {
				return nil
			}
			cancelled[i].Store(err == nil)
			return err
		}
		won, err := oneWon(s.JobFinishMany(t.Context(), []*store.JobFinishParams{completion(j, fmt.Sprint(i), at(2*time.Second))}))
		completed[i].Store(won)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range parents {
		c, d := cancelled[i].Load(), completed[i].Load()
		if c == d {
			t.Errorf("job %d: cancel won %v, finish won %v: want exactly one", p.ID, c, d)
			continue
		}
		want, wantDep, wantRec := idemtype.StateCancelled, idemtype.StateCancelled, idemtype.RecordFailed
		if d {
			want, wantDep, wantRec = idemtype.StateCompleted, idemtype.StateAvailable, idemtype.RecordCompleted
		}
		if got := mustGet(t, s, p.ID); got.State != want {
			t.Errorf("job %d: %s, want %s", p.ID, got.State, want)
		}
		if got := mustGet(t, s, deps[i].ID); got.State != wantDep {
			t.Errorf("dependant %d of job %d: %s, want %s", got.ID, p.ID, got.State, wantDep)
		}
		if r := record(t, s, "default", p.IdempotencyKey, at(3*time.Second)); r.Status != wantRec {
			t.Errorf("record of job %d: %s, want %s", p.ID, r.Status, wantRec)
		}
		if as := attempts(t, s, p.ID); len(as) != 1 {
			t.Errorf("job %d: attempts %s, want one", p.ID, fmtAttempts(as))
		}
	}
}

// testRaceRescueClaims: 120 running jobs whose leases ended at 1m; at 2m
// three rescuers (Limit 10, until none is left), late finishes of the
// even jobs with their old tokens, late heartbeats of the odd ones, and
// three claimers race. Overlap: the nine goroutines wait on parallel's
// start barrier and are released together. No job is rescued twice; an
// even job is completed by its late finish or rescued, never both; every
// odd job is rescued; every rescued job is claimed again exactly once (its
// attempt 2) and no completed job is; no late heartbeat succeeds.
func testRaceRescueClaims(t *testing.T, s store.Store) {
	const n, rescuers, claimers = 120, 3, 3
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = newJob("k")
	}
	insertNew(t, s, at(0), ps...)
	old := claimAll(t, s, n, at(0), at(time.Minute))
	late := at(2 * time.Minute)
	var (
		mu        sync.Mutex
		rescued   = map[int64]int{}
		finished  = map[int64]bool{}
		beats     atomic.Int32
		writersUp atomic.Int32 // rescuers and the finisher still running
	)
	writersUp.Store(rescuers + 1)
	set := newClaimSet()
	err := parallel(rescuers+2+claimers, func(g int) error {
		switch {
		case g < rescuers:
			defer writersUp.Add(-1)
			for {
				got, err := s.JobRescue(t.Context(), &store.JobRescueParams{Now: late, Limit: 10})
				if err != nil || len(got) == 0 {
					return err
				}
				mu.Lock()
				for _, r := range got {
					rescued[r.ID]++
				}
				mu.Unlock()
			}
		case g == rescuers:
			defer writersUp.Add(-1)
			for i := 0; i < n; i += 2 {
				won, err := oneWon(s.JobFinishMany(t.Context(), []*store.JobFinishParams{completion(old[i], `"late"`, late)}))
				if err != nil {
					return err
				}
				mu.Lock()
				finished[old[i].ID] = won
				mu.Unlock()
			}
			return nil
		case g == rescuers+1:
			for i := 1; i < n; i += 2 {
				errs, err := s.JobHeartbeatMany(t.Context(), &store.JobHeartbeatParams{
					Leases: []store.Lease{{ID: old[i].ID, Token: old[i].LeaseToken}}, Until: late.Add(time.Hour), Now: late})
				if err != nil {
					return err
				}
				if errs[0] == nil {
					beats.Add(1)
				}
			}
			return nil
		}
		return claimUntilDone(s, t, g, set, func() bool { return writersUp.Load() == 0 }, late)
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := beats.Load(); b != 0 {
		t.Errorf("%d heartbeats of expired leases succeeded", b)
	}
	for i, j := range old {
		r, f, c := rescued[j.ID], finished[j.ID], set.seen[j.ID]
		switch {
		case r > 1:
			t.Errorf("job %d rescued %d times", j.ID, r)
		case i%2 == 1 && r != 1:
			t.Errorf("odd job %d rescued %d times, want 1", j.ID, r)
		case f == (r == 1):
			t.Errorf("job %d: late finish won %v, rescued %d times: want exactly one", j.ID, f, r)
		case c != r:
			t.Errorf("job %d: rescued %d times, claimed again %d times", j.ID, r, c)
		case c == 1 && set.rows[j.ID].Attempt != 2:
			t.Errorf("job %d claimed again with attempt %d, want 2", j.ID, set.rows[j.ID].Attempt)
		}
	}
	if len(set.seen) == 0 {
		t.Error("no rescued job was claimed")
	}
}

// testRaceHeartbeatRescue: 120 running jobs whose leases end at 1m; at
// 59s each job's heartbeat (until 1h) races rescuers at 90s. Overlap:
// four heartbeaters (one job per call) and three rescuers (Limit 5, until
// none is left) wait on parallel's start barrier and are released
// together. A job is rescued exactly when its heartbeat failed: a
// heartbeat that succeeded kept the job running with the new lease end,
// and a rescued job's heartbeat is ErrLeaseLost.
func testRaceHeartbeatRescue(t *testing.T, s store.Store) {
	const n, beaters, rescuers = 120, 4, 3
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = newJob("k")
	}
	insertNew(t, s, at(0), ps...)
	jobs := claimAll(t, s, n, at(0), at(time.Minute))
	var (
		mu      sync.Mutex
		beat    = map[int64]bool{}
		rescued = map[int64]int{}
	)
	err := parallel(beaters+rescuers, func(g int) error {
		if g >= beaters {
			for {
				got, err := s.JobRescue(t.Context(), &store.JobRescueParams{Now: at(90 * time.Second), Limit: 5})
				if err != nil || len(got) == 0 {
					return err
				}
				mu.Lock()
				for _, r := range got {
					rescued[r.ID]++
				}
				mu.Unlock()
			}
		}
		for i := g; i < n; i += beaters {
			won, err := oneWon(s.JobHeartbeatMany(t.Context(), &store.JobHeartbeatParams{
				Leases: []store.Lease{{ID: jobs[i].ID, Token: jobs[i].LeaseToken}}, Until: at(time.Hour), Now: at(59 * time.Second)}))
			if err != nil {
				return err
			}
			mu.Lock()
			beat[jobs[i].ID] = won
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A rescue after every heartbeat finds nothing new: a rescuer that
	// stopped before a heartbeat failed must not have left a job behind.
	if got, err := s.JobRescue(t.Context(), &store.JobRescueParams{Now: at(90 * time.Second), Limit: 1000}); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range got {
			rescued[r.ID]++
		}
	}
	for _, j := range jobs {
		b, r := beat[j.ID], rescued[j.ID]
		if r > 1 || b == (r == 1) {
			t.Errorf("job %d: heartbeat succeeded %v, rescued %d times: want exactly one of them", j.ID, b, r)
			continue
		}
		got := mustGet(t, s, j.ID)
		if b && (got.State != idemtype.StateRunning || got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(at(time.Hour))) {
			t.Errorf("job %d kept by its heartbeat: %s, lease %v", j.ID, got.State, got.LeaseExpiresAt)
		}
		if !b && got.State != idemtype.StateRetryable {
			t.Errorf("rescued job %d: %s, want retryable", j.ID, got.State)
		}
	}
}

// testRaceRetryClaims: 120 dead jobs are requeued by four racing
// JobRetryMany calls (two by their ids, two by a filter on the dead state)
// while three claimers claim them. Overlap: the seven goroutines wait on
// parallel's start barrier and are released together. Every job is moved
// by exactly one requeue (a job already moved, or claimed since, is no
// longer dead) and claimed exactly once, with attempt 1.
func testRaceRetryClaims(t *testing.T, s store.Store) {
	const n, retriers, claimers = 120, 4, 3
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = newJob("k")
	}
	insertNew(t, s, at(0), ps...)
	var ids []int64
	for _, j := range claimAll(t, s, n, at(0), at(time.Hour)) {
		finish1(t, s, failure(j, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(time.Second)))
		ids = append(ids, j.ID)
	}
	var (
		mu        sync.Mutex
		moved     = map[int64]int{}
		retriesUp atomic.Int32
	)
	retriesUp.Store(retriers)
	set := newClaimSet()
	now := at(time.Minute)
	err := parallel(retriers+claimers, func(g int) error {
		if g >= retriers {
			return claimUntilDone(s, t, g, set, func() bool { return retriesUp.Load() == 0 }, now)
		}
		defer retriesUp.Add(-1)
		p := &store.JobRetryManyParams{FromStates: []idemtype.JobState{idemtype.StateDead}, Now: now}
		if g%2 == 0 {
			p.IDs = ids
		} else {
			p.Filter = store.JobFilter{Tenant: "default", States: []idemtype.JobState{idemtype.StateDead}}
		}
		rows, err := s.JobRetryMany(t.Context(), p)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			moved[r.ID]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if m, c := moved[id], set.seen[id]; m != 1 || c != 1 {
			t.Errorf("job %d: requeued %d times, claimed %d times: want 1 and 1", id, m, c)
		} else if a := set.rows[id].Attempt; a != 1 {
			t.Errorf("job %d claimed with attempt %d, want 1", id, a)
		}
	}
}

// testRaceDependantRelease: 90 running parents are finished, one per
// goroutine, while three claimers claim. Dependants: 20 wait for two
// completed parents, 15 (DependsOnFinished) for a completed and a dead
// parent, 10 for a completed and a dead parent (so they are cancelled).
// Overlap: the 90 finishers and the claimers wait on parallel's start
// barrier and are released together, so the two parents of a dependant
// finish in concurrent transactions. The 35 released dependants are
// claimed exactly once each; no cancelled one and no parent is claimed.
func testRaceDependantRelease(t *testing.T, s store.Store) {
	const both, anyOutcome, withDead, claimers = 20, 15, 10, 3
	const pairs = both + anyOutcome + withDead
	ps := make([]*store.JobInsertParams, 2*pairs)
	for i := range ps {
		ps[i] = newJob("parent")
	}
	parents := insertNew(t, s, at(0), ps...)
	deps := make([]*store.JobInsertParams, pairs)
	for i := range deps {
		deps[i] = newJob("dependant")
		deps[i].DependsOn = []int64{parents[2*i].ID, parents[2*i+1].ID}
		deps[i].DependsOnFinished = i >= both && i < both+anyOutcome
	}
	dependants := insertNew(t, s, at(0), deps...)
	running := map[int64]*idemtype.JobRow{}
	for _, j := range claimAll(t, s, 2*pairs, at(time.Second), at(time.Hour)) {
		running[j.ID] = j
	}
	var finishersUp atomic.Int32
	finishersUp.Store(2 * pairs)
	set := newClaimSet()
	now := at(2 * time.Second)
	err := parallel(2*pairs+claimers, func(g int) error {
		if g >= 2*pairs {
			return claimUntilDone(s, t, g, set, func() bool { return finishersUp.Load() == 0 }, now)
		}
		defer finishersUp.Add(-1)
		j := running[parents[g].ID]
		p := completion(j, `{}`, now)
		if g%2 == 1 && g/2 >= both {
			p = failure(j, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, now)
		}
		return finishEach(t, s, []*store.JobFinishParams{p})
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, c := range set.seen {
		if running[id] != nil {
			t.Errorf("parent %d claimed %d times after it finished", id, c)
		}
	}
	for i, d := range dependants {
		c := set.seen[d.ID]
		if i < both+anyOutcome && c != 1 {
			t.Errorf("dependant %d (%d): claimed %d times, want 1", i, d.ID, c)
		}
		if i >= both+anyOutcome {
			if c != 0 {
				t.Errorf("dependant %d (%d) of a dead parent claimed %d times", i, d.ID, c)
			}
			wantState(t, s, d.ID, idemtype.StateCancelled)
		}
	}
}

// testRaceEventKey: 32 inserts of one keyed event create one event, and
// every insert returns it. Overlap: the 32 goroutines wait on parallel's
// start barrier and are released together, each with its single insert.
func testRaceEventKey(t *testing.T, s store.Store) {
	const n = 32
	got := make([]*store.Event, n)
	var created atomic.Int32
	err := parallel(n, func(i int) error {
		ev, existing, err := s.EventInsert(t.Context(), &store.Event{Tenant: "t", Topic: "orders", Type: "paid",
			Key: "order-1/paid", Payload: []byte(`{"n":1}`), CreatedAt: at(0), Deliveries: 2})
		if err != nil {
			return err
		}
		if !existing {
			created.Add(1)
		}
		got[i] = ev
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := created.Load(); c != 1 {
		t.Fatalf("%d inserts created the event, want 1", c)
	}
	for i, ev := range got {
		if ev.ID != got[0].ID {
			t.Errorf("insert %d: event %d, insert 0: event %d", i, ev.ID, got[0].ID)
		}
	}
	list, err := s.EventList(t.Context(), &store.EventListParams{Tenant: "t", Topic: "orders", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("%d events stored, want 1", len(list))
	}
}

// testRaceFairClaims: 8 tenants of 40 jobs each (priorities 0-3, every
// fifth job scheduled and due by the claims' Now, tenant t0 weighted 3)
// are claimed and completed by six claimers: four claim every tenant, two
// only tenants t1 and t2 (as a pull worker of a tenant does). Overlap: the
// claimers wait on parallel's start barrier, are released together, and
// claim in a loop until every job is completed. Every job is claimed
// exactly once, and ends completed.
func testRaceFairClaims(t *testing.T, s store.Store) {
	const tenants, per, claimers = 8, 40, 6
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "t0"}, Weight: 3})
	for tn := range tenants {
		ps := tenantJobs(fmt.Sprint("t", tn), per)
		for i, p := range ps {
			p.Priority = i % 4
			if i%5 == 0 {
				p.RunAt = at(500 * time.Millisecond)
			}
		}
		insertNew(t, s, at(0), ps...)
	}
	var done atomic.Int64
	set := newClaimSet()
	deadline := time.Now().Add(60 * time.Second)
	err := parallel(claimers, func(g int) error {
		tenant := ""
		if g >= 4 {
			tenant = fmt.Sprint("t", g-3)
		}
		for done.Load() < tenants*per {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d jobs done", done.Load(), tenants*per)
			}
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Tenant: tenant, Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 5, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil || len(jobs) == 0 {
				if err != nil {
					return err
				}
				continue
			}
			set.add(jobs)
			fins := make([]*store.JobFinishParams, len(jobs))
			for i, j := range jobs {
				if tenant != "" && j.Tenant != tenant {
					return fmt.Errorf("claim of tenant %s returned job %d of %s", tenant, j.ID, j.Tenant)
				}
				fins[i] = completion(j, `1`, at(2*time.Second))
			}
			if err := finishEach(t, s, fins); err != nil {
				return err
			}
			done.Add(int64(len(jobs)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.seen) != tenants*per {
		t.Errorf("%d distinct jobs claimed, want %d", len(set.seen), tenants*per)
	}
	for id, n := range set.seen {
		if n != 1 {
			t.Errorf("job %d claimed %d times", id, n)
		}
	}
	stats, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Tenant: "", Now: at(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(stats, "default", idemtype.StateCompleted); n != tenants*per {
		t.Errorf("%d jobs completed, want %d", n, tenants*per)
	}
}

// oneWon reads the answer of a one-item finish or heartbeat in a race:
// won when the item succeeded, neither won nor an error when another
// racer had the lease (ErrLeaseLost), an error otherwise.
func oneWon(errs []error, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	if errs[0] != nil && !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		return false, errs[0]
	}
	return errs[0] == nil, nil
}
