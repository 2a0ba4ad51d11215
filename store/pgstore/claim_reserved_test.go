package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// openStores opens n stores on one new schema, as n processes would.
func openStores(t *testing.T, n, maxConns int) []*Store {
	t.Helper()
	url, schema := dbtest.NewSchema(t)
	var out []*Store
	for range n {
		s, err := Open(context.Background(), withPoolSize(url, maxConns), &Config{CallerClock: true, Schema: schema})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

func insertJobs(t *testing.T, s *Store, now time.Time, tenants []string, n int) {
	t.Helper()
	var ps []*store.JobInsertParams
	for i := range n {
		ps = append(ps, &store.JobInsertParams{Tenant: tenants[i%len(tenants)], Queue: "q", Kind: "k",
			Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now})
	}
	if _, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
		t.Fatal(err)
	}
}

func putLimits(t *testing.T, s *Store, now time.Time, ls ...store.Limit) {
	t.Helper()
	for _, l := range ls {
		if _, err := s.LimitPut(context.Background(), &store.LimitPutParams{Limit: l, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
}

// markClaimed adds the jobs to seen, or says which one it had already.
func markClaimed(seen map[int64]bool, jobs []*idemtype.JobRow) error {
	for _, j := range jobs {
		if seen[j.ID] {
			return fmt.Errorf("job %d claimed twice", j.ID)
		}
		seen[j.ID] = true
	}
	return nil
}

func claimN(t *testing.T, s *Store, now time.Time, limit int) []*idemtype.JobRow {
	t.Helper()
	jobs, err := s.JobClaim(context.Background(), &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: limit,
		LeaseUntil: now.Add(time.Hour), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// Three stores on one schema (three processes) race claimers over a queue
// with a concurrency of 6 and a rate of 60 a minute, two tenants with
// rates of their own (one for every queue, one for this queue) and two
// without, through two windows. No job runs twice, no more than 6 run at
// once, no window starts more than a rate allows, the tenants without a
// rate of their own get work, and every store took the reserved claim.
// With defaults, default rates for every queue (8) and for this one (6)
// bind every tenant without a rate of its own for that queue scope: t0
// (10 of its own for every queue) inherits the second (6), t1 (15 of its
// own for this queue) the first (8), t2 and t3 both (6).
// With tenants' concurrency, t2 may run 2 at once (its own, every queue)
// and every tenant without a limit of its own for this queue 3 (a default
// for this queue: t0, t2 and t3), and none ever runs more.
func TestReservedClaimRacingStores(t *testing.T) {
	t.Parallel()
	t.Run("own rates", func(t *testing.T) { racingReservedClaims(t, false, false) })
	t.Run("defaults", func(t *testing.T) { racingReservedClaims(t, true, false) })
	t.Run("tenants' concurrency", func(t *testing.T) { racingReservedClaims(t, false, true) })
}

func racingReservedClaims(t *testing.T, defaults, conc bool) {
	ctx := context.Background()
	stores := openStores(t, 3, 6)
	w0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tenants := []string{"t0", "t1", "t2", "t3"}
	insertJobs(t, stores[0], w0, tenants, 400)
	putLimits(t, stores[0], w0,
		store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 60, Period: time.Minute, Concurrency: 6},
		store.Limit{FlowScope: store.FlowScope{Tenant: "t0"}, Rate: 10, Period: time.Minute},
		store.Limit{FlowScope: store.FlowScope{Tenant: "t1", Queue: "q"}, Rate: 15, Period: time.Minute})
	rates := map[string]int{"t0": 10, "t1": 15}
	if defaults {
		putLimits(t, stores[0], w0,
			store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant}, Rate: 8, Period: time.Minute},
			store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "q"}, Rate: 6, Period: time.Minute})
		rates = map[string]int{"t0": 6, "t1": 8, "t2": 6, "t3": 6}
	}
	concs := map[string]int{}
	if conc {
		putLimits(t, stores[0], w0,
			store.Limit{FlowScope: store.FlowScope{Tenant: "t2"}, Concurrency: 2},
			store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "q"}, Concurrency: 3})
		concs = map[string]int{"t0": 3, "t2": 2, "t3": 3}
	}
	var (
		mu               sync.Mutex
		running, most    int
		runningT, mostT  = map[string]int{}, map[string]int{}
		seen             = map[int64]bool{}
		started          = map[string]int{} // tenant@window → jobs
		startedInWindow  = map[time.Time]int{}
		errs             = make(chan error, 16)
		wg               sync.WaitGroup
		windows          = []time.Time{w0.Add(30 * time.Second), w0.Add(90 * time.Second)}
		claimersPerStore = 3
	)
	for _, now := range windows {
		for si, s := range stores {
			for c := range claimersPerStore {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var held []*idemtype.JobRow
					finish := func(jobs []*idemtype.JobRow) error {
						mu.Lock()
						running -= len(jobs) // before the store stops counting them
						for _, j := range jobs {
							runningT[j.Tenant]--
						}
						mu.Unlock()
						fins := make([]*store.JobFinishParams, len(jobs))
						for i, j := range jobs {
							fins[i] = &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
								Outcome: idemtype.OutcomeCompleted, FinishedAt: now}
						}
						_, err := s.JobFinishMany(ctx, fins)
						return err
					}
					for range 25 {
						jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"},
							WorkerID: fmt.Sprint("s", si, "c", c), Limit: 1 + (si+c)%4, LeaseUntil: now.Add(time.Hour), Now: now})
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						if err := markClaimed(seen, jobs); err != nil {
							mu.Unlock()
							errs <- err
							return
						}
						for _, j := range jobs {
							started[j.Tenant+"@"+now.Truncate(time.Minute).String()]++
							startedInWindow[now.Truncate(time.Minute)]++
							runningT[j.Tenant]++
							mostT[j.Tenant] = max(mostT[j.Tenant], runningT[j.Tenant])
						}
						running += len(jobs) // after the store counts them
						most = max(most, running)
						mu.Unlock()
						if err := finish(held); err != nil {
							errs <- err
							return
						}
						held = jobs
					}
					if err := finish(held); err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("most running %d (limit 6); started per window %v; per tenant %v", most, startedInWindow, started)
	if most > 6 {
		t.Errorf("%d jobs ran at once, concurrency 6", most)
	}
	for tenant, c := range concs {
		if mostT[tenant] > c {
			t.Errorf("tenant %s ran %d jobs at once, concurrency %d", tenant, mostT[tenant], c)
		}
	}
	if conc {
		taken := int64(0)
		for _, s := range stores {
			taken += s.reservedConc.Load()
		}
		t.Logf("most running per tenant %v; reserved claims under tenants' concurrency: %d", mostT, taken)
		if taken == 0 {
			t.Error("no store took the reserved claim under tenants' concurrency")
		}
	}
	for w, n := range startedInWindow {
		if n > 60 {
			t.Errorf("window %v started %d jobs, queue rate 60", w, n)
		}
	}
	for _, w := range windows {
		key := w.Truncate(time.Minute).String()
		for tenant, rate := range rates {
			if n := started[tenant+"@"+key]; n > rate {
				t.Errorf("tenant %s started %d jobs in window %s, rate %d", tenant, n, key, rate)
			}
		}
		if started["t2@"+key]+started["t3@"+key] == 0 {
			t.Errorf("tenants without a rate of their own started nothing in window %s", key)
		}
	}
	for i, s := range stores {
		if s.reservedTaken.Load() == 0 || defaults && s.reservedInherited.Load() == 0 {
			t.Errorf("store %d never took the reserved claim (%d claims, %d under defaults)", i, s.reservedTaken.Load(),
				s.reservedInherited.Load())
		}
	}
}

// Budget one store reserved and did not spend is not another's to start
// in the same window until the first store closes, which gives it back.
func TestReservedBudgetGivenBackOnClose(t *testing.T) {
	stores := openStores(t, 2, 4)
	a, b := stores[0], stores[1]
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	putLimits(t, a, now, store.Limit{FlowScope: store.FlowScope{Tenant: "t"}, Rate: 10, Period: time.Minute})
	insertJobs(t, a, now, []string{"t"}, 1)
	if got := claimN(t, a, now, 6); len(got) != 1 {
		t.Fatalf("a claimed %d jobs, want the only one", len(got))
	}
	// a holds 5 of the window's 10 (it reserved a claim's worth, 6, and
	// started 1): b can start 4.
	insertJobs(t, a, now, []string{"t"}, 20)
	if got := claimN(t, b, now, 10); len(got) != 4 {
		t.Fatalf("b claimed %d jobs while a holds 5 of 10 (1 started), want 4", len(got))
	}
	if got := claimN(t, b, now, 10); len(got) != 0 {
		t.Fatalf("b claimed %d more jobs, want none", len(got))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := claimN(t, b, now, 10); len(got) != 5 {
		t.Fatalf("after a closed, b claimed %d jobs, want the 5 a gave back", len(got))
	}
	ls, err := b.LimitList(context.Background(), &store.LimitListParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].WindowUsed != 10 {
		t.Fatalf("limits %+v, want t's window used 10", ls)
	}
}

// A store that caches a queue's limits sees what another process changes
// on its next claim: a pause, a lower rate, a tenant concurrency (a limit
// the reserved claim leaves to the locking path).
func TestReservedClaimSeesOtherStoresChanges(t *testing.T) {
	ctx := context.Background()
	stores := openStores(t, 2, 4)
	a, b := stores[0], stores[1]
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	putLimits(t, a, now, store.Limit{FlowScope: store.FlowScope{Tenant: "t0"}, Rate: 100, Period: time.Minute},
		store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 1000, Period: time.Minute})
	insertJobs(t, a, now, []string{"t0", "t1"}, 200)
	if got := claimN(t, a, now, 4); len(got) != 4 || a.reservedTaken.Load() != 1 {
		t.Fatalf("a claimed %d jobs (reserved claims %d), want 4 reserved", len(got), a.reservedTaken.Load())
	}
	if err := b.QueuePause(ctx, &store.QueuePauseParams{Scope: store.FlowScope{Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	if got := claimN(t, a, now, 4); len(got) != 0 {
		t.Fatalf("a claimed %d jobs of a queue b paused", len(got))
	}
	if err := b.QueueResume(ctx, &store.QueuePauseParams{Scope: store.FlowScope{Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	// a reads the limits again and reserves under them (t0: 100 a minute).
	taken := a.reservedTaken.Load()
	if got := claimN(t, a, now, 4); len(got) != 4 || a.reservedTaken.Load() != taken+1 {
		t.Fatalf("after the resume a claimed %d jobs (reserved claims %d), want 4 reserved", len(got), a.reservedTaken.Load()-taken)
	}
	// b lowers t0's rate to 3: LimitPut with another rate starts the
	// window again, so t0 may start 3 more in it, not what a reserved under
	// the rate of 100.
	putLimits(t, b, now, store.Limit{FlowScope: store.FlowScope{Tenant: "t0"}, Rate: 3, Period: time.Minute})
	n := map[string]int{}
	for range 3 {
		for _, j := range claimN(t, a, now, 10) {
			n[j.Tenant]++
		}
	}
	if n["t0"] != 3 {
		t.Fatalf("a claimed %d jobs of t0 after b set its rate to 3 (a new window count), want 3", n["t0"])
	}
	putLimits(t, b, now, store.Limit{FlowScope: store.FlowScope{Tenant: "t1"}, Concurrency: 1})
	n = map[string]int{}
	for _, j := range claimN(t, a, now, 10) {
		n[j.Tenant]++
	}
	// t1 has jobs running from the claims above: none may start now.
	if n["t1"] > 0 {
		t.Fatalf("a claimed %d jobs of t1 over its concurrency of 1 (with jobs running)", n["t1"])
	}
}

// dumpReserved prints what s holds of each limit, for failure messages.
func (s *Store) dumpReserved() string {
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	out := ""
	for name, m := range map[string]map[string]*queueBudget{"queues": s.reserved.queues, "old": s.reserved.old} {
		for q, qb := range m {
			for _, b := range qb.list {
				out += fmt.Sprintf("%s %s gen %d: %s/%s rate %d/%v def %d ws %v left %d\n", name, q, qb.gen, b.limit.Tenant, b.limit.Queue, b.limit.Rate, b.limit.Period, b.defVer, b.ws, b.left)
			}
		}
	}
	return out
}

// A tenant's rate for every queue is shared by claims of two queues that
// two stores run at once (each store's claims of different queues run side
// by side): the tenant never starts more than its rate in the window.
func TestReservedClaimTenantRateAcrossQueues(t *testing.T) {
	ctx := context.Background()
	stores := openStores(t, 2, 6)
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	var ps []*store.JobInsertParams
	for i := range 200 {
		ps = append(ps, &store.JobInsertParams{Tenant: []string{"t0", "t1"}[i%2], Queue: []string{"q1", "q2"}[i/2%2],
			Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now})
	}
	if _, err := stores[0].JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
		t.Fatal(err)
	}
	putLimits(t, stores[0], now,
		store.Limit{FlowScope: store.FlowScope{Tenant: "t0"}, Rate: 12, Period: time.Minute},
		store.Limit{FlowScope: store.FlowScope{Queue: "q1"}, Rate: 1000, Period: time.Minute},
		store.Limit{FlowScope: store.FlowScope{Queue: "q2"}, Rate: 1000, Period: time.Minute})
	var (
		mu      sync.Mutex
		started = map[string]int{}
		seen    = map[int64]bool{}
		wg      sync.WaitGroup
		errs    = make(chan error, 8)
	)
	for si, s := range stores {
		for _, q := range []string{"q1", "q2"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{q}, WorkerID: fmt.Sprint("s", si, q),
						Limit: 3, LeaseUntil: now.Add(time.Hour), Now: now})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					err = markClaimed(seen, jobs)
					for _, j := range jobs {
						started[j.Tenant]++
					}
					mu.Unlock()
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("started %v; reserved claims %d and %d", started, stores[0].reservedTaken.Load(), stores[1].reservedTaken.Load())
	if started["t0"] > 12 {
		t.Fatalf("t0 started %d jobs over two queues in one window, its rate is 12", started["t0"])
	}
	if started["t0"] == 0 || started["t1"] == 0 {
		t.Fatalf("started %v: both tenants should have started work", started)
	}
	if stores[0].reservedTaken.Load() == 0 || stores[1].reservedTaken.Load() == 0 {
		t.Fatalf("a store never took the reserved claim")
	}
}

// Under a default rate the reserved claim visits only tenants its store
// wrote to flow_known: their rows are written as the store meets them,
// written again when they went (a claim declines for them once), and
// removed by Close.
func TestReservedClaimKnownTenants(t *testing.T) {
	ctx := context.Background()
	stores := openStores(t, 2, 4)
	s, other := stores[0], stores[1]
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	putLimits(t, s, now, store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant}, Rate: 50, Period: time.Minute})
	insertJobs(t, s, now, []string{"t0", "t1"}, 20)
	known := func(st *Store) []string {
		rows, err := st.pool.Query(ctx, st.sql(`SELECT tenant FROM {schema}.flow_known WHERE holder = $1 AND queue = 'q' ORDER BY tenant`), st.holder)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	started := len(claimN(t, s, now, 4))
	if got := known(s); !slices.Equal(got, []string{"t0", "t1"}) {
		t.Fatalf("known tenants %v, want [t0 t1]", got)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`DELETE FROM {schema}.flow_known`)); err != nil {
		t.Fatal(err)
	}
	taken := s.reservedTaken.Load()
	started += len(claimN(t, s, now, 4))
	started += len(claimN(t, s, now, 4))
	if got := known(s); !slices.Equal(got, []string{"t0", "t1"}) {
		t.Fatalf("known tenants after their rows went %v, want [t0 t1]", got)
	}
	if s.reservedTaken.Load() == taken {
		t.Error("no reserved claim after the rows went")
	}
	started += len(claimN(t, other, now, 10))
	if started != 20 {
		t.Errorf("started %d of the 20 jobs", started)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := known(other); len(got) == 0 {
		t.Error("the other store wrote no known tenants")
	}
	var n int
	if err := other.pool.QueryRow(ctx, other.sql(`SELECT count(*) FROM {schema}.flow_known WHERE holder = $1`), s.holder).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d known tenants of a closed store left", n)
	}
}

// Budget a store reserved under a default that was put again since (a new
// rate starts its tenants' windows again) is not given back into the new
// windows at Close: the store holds tenant u's budget of queue y under the
// old default and of queue x under the new one, another store spends the
// rest of u's new window, and after Close exactly what was reserved under
// the new default can start.
func TestReservedInheritedBudgetGivenBackUnderItsDefault(t *testing.T) {
	ctx := context.Background()
	stores := openStores(t, 2, 4)
	a, b := stores[0], stores[1]
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	insert := func(queue string, n int) {
		var ps []*store.JobInsertParams
		for range n {
			ps = append(ps, &store.JobInsertParams{Tenant: "u", Queue: queue, Kind: "k", Args: json.RawMessage(`{}`),
				MaxAttempts: 3, RunAt: now})
		}
		if _, err := a.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(s *Store, queue string, limit int) int {
		jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, WorkerID: "w", Limit: limit,
			LeaseUntil: now.Add(time.Hour), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	every := store.FlowScope{Tenant: store.EveryTenant}
	putLimits(t, a, now, store.Limit{FlowScope: every, Rate: 10, Period: time.Minute})
	insert("y", 1)
	if got := claim(a, "y", 6); got != 1 { // reserves 6 of u's window, starts 1
		t.Fatalf("a claimed %d of y, want 1", got)
	}
	putLimits(t, a, now, store.Limit{FlowScope: every, Rate: 12, Period: time.Minute}) // new windows of 12
	insert("x", 1)
	if got := claim(a, "x", 3); got != 1 { // reserves 3 of the new window, starts 1
		t.Fatalf("a claimed %d of x, want 1", got)
	}
	insert("x", 30)
	if got := claim(b, "x", 20); got != 9 {
		t.Fatalf("b claimed %d of x, want the 9 left of u's 12", got)
	}
	if a.reservedInherited.Load() == 0 {
		t.Fatal("a never took the reserved claim")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// a gave back the 2 it held under the new default, not the 5 under
	// the old one.
	if got := claim(b, "x", 20); got != 2 {
		t.Fatalf("b claimed %d more after a closed, want 2: u started %d in a window of 12", got, 10+got)
	}
}

// TestQueueBudgetLow: the budgets a claim walks (queueBudget.low) are
// exactly those that hold less than the claim, as a walk of every budget
// finds them, while budgets are spent, topped up, taken back and their
// windows end, claims change size, and a claim's now is now and then
// earlier than the one before (claims take their now before they queue).
func TestQueueBudgetLow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	qb := &queueBudget{tenants: map[string][]*rateBudget{}}
	for i := range 50 {
		period := []time.Duration{time.Second, time.Minute}[i%2]
		b := &rateBudget{limit: store.Limit{FlowScope: store.FlowScope{Tenant: fmt.Sprint("t", i)}, Rate: 100, Period: period}}
		qb.list = append(qb.list, b)
	}
	for step := range 2000 {
		claim := 1 + rng.IntN(10)
		if step > 1000 {
			claim = 1 + rng.IntN(4) // smaller claims than lowMark
		}
		at := now
		if rng.IntN(10) == 0 {
			at = now.Add(-time.Duration(rng.IntN(2000)) * time.Millisecond)
		}
		var want []*rateBudget
		for _, b := range qb.list {
			if b.allowance(at) < claim {
				want = append(want, b)
			}
		}
		got := qb.low(at, claim)
		slices.SortFunc(got, func(a, b *rateBudget) int { return strings.Compare(a.limit.Tenant, b.limit.Tenant) })
		slices.SortFunc(want, func(a, b *rateBudget) int { return strings.Compare(a.limit.Tenant, b.limit.Tenant) })
		if !slices.Equal(got, want) {
			t.Fatalf("step %d, claim %d: low gave %d budgets, a walk of all %d", step, claim, len(got), len(want))
		}
		// What claims and general paths do to budgets, each followed by
		// watch where the store calls it.
		b := qb.list[rng.IntN(len(qb.list))]
		switch rng.IntN(4) {
		case 0: // topped up in now's window (reserve)
			if ws := b.limit.WindowAt(now); !b.ws.Equal(ws) {
				b.ws, b.left = ws, 0
			}
			b.left += rng.IntN(30)
		case 1: // spent by a claim
			b.left -= min(b.left, rng.IntN(5))
			qb.watch(b)
		case 2: // taken back (absorbReserved)
			b.left = 0
			qb.watch(b)
		}
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
	}
}

// TestRetentionForgetsStaleKnownTenants: the flow_known rows of a store
// that crashed (nothing closes them) were deleted only by the next Open
// that migrates; nodes started with --no-migrate (the recommended
// production set-up) never did, and the table only grew. The maintenance
// leader's retention run forgets rows a day old; a live store's rows stay.
func TestRetentionForgetsStaleKnownTenants(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 2, &Config{})
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {schema}.flow_known (holder, queue, tenant, written)
VALUES ('crashed', 'q', 'a', now() - interval '2 days'), ('live', 'q', 'a', now())`)); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := s.JobDeleteFinished(ctx, &store.JobDeleteFinishedParams{CompletedBefore: now.Add(-time.Hour),
		CancelledBefore: now.Add(-time.Hour), DeadBefore: now.Add(-time.Hour), Limit: 10, Now: now}); err != nil {
		t.Fatal(err)
	}
	var holders []string
	rows, err := s.pool.Query(ctx, s.sql(`SELECT holder FROM {schema}.flow_known ORDER BY holder`))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(holders) != 1 || holders[0] != "live" {
		t.Fatalf("flow_known holders after retention: %v, want [live]", holders)
	}
}
