package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The one-round-trip limited claim takes, counts and reports exactly what
// the general path does: two stores on their own schemas get the same jobs,
// limits and claims (random, seeded; limits small enough to bind often,
// time moving across their windows, running jobs finishing, limits
// changing and deleted, default limits of tenant '*' among them), one
// store always trying the one-round-trip claim and the
// other never; after every claim the claimed jobs, the claim's report, the
// queue's rotation cursor (where the next claim starts) and every limit's
// usage (window, running, throttled) must be equal. It fails
// unless the one-round-trip claim both accepted and declined many claims
// (over all seeds).
func TestLimitedClaimOneRoundMatchesGeneralPath(t *testing.T) {
	t.Parallel()
	sum := eachSeed(t, 4, func(t *testing.T, seed uint64) pathCounts { return compareLimitedPaths(t, seed, false) })
	if sum.took < 40 || sum.declined < 40 {
		t.Fatalf("the one-round-trip claim took %d and declined %d claims: the comparison did not cover both", sum.took, sum.declined)
	}
}

// eachSeed runs compare for the seeds 1 to n as parallel subtests (each
// on stores of its own; the comparisons wait on round trips more than they
// compute) and returns the sum of their counts once all have ended.
func eachSeed(t *testing.T, n uint64, compare func(t *testing.T, seed uint64) pathCounts) pathCounts {
	var (
		mu  sync.Mutex
		sum pathCounts
	)
	t.Run("seeds", func(t *testing.T) {
		for seed := uint64(1); seed <= n; seed++ {
			t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
				t.Parallel()
				c := compare(t, seed)
				mu.Lock()
				sum.add(c)
				mu.Unlock()
			})
		}
	})
	return sum
}

// pathCounts are the claims each path took in compareLimitedPaths.
type pathCounts struct {
	took, declined                                    int64 // one round
	reserved, inherited, paused, weighted, tenantConc int64
	concBound, concSkipped                            int64 // of tenantConc
}

func (c *pathCounts) add(o pathCounts) {
	c.took, c.declined, c.reserved, c.inherited = c.took+o.took, c.declined+o.declined, c.reserved+o.reserved, c.inherited+o.inherited
	c.paused, c.weighted, c.tenantConc = c.paused+o.paused, c.weighted+o.weighted, c.tenantConc+o.tenantConc
	c.concBound += o.concBound
	c.concSkipped += o.concSkipped
}

// The reserved claim (claim_reserved.go) takes, counts and reports what the
// general path does, and LimitList shows the same usage, when one store
// claims alone: the comparison above with only the limits it applies to
// (queue rates and concurrencies, tenants' rates, for every queue or this
// one) and with them put, changed and deleted as it goes.
func TestReservedClaimMatchesGeneralPath(t *testing.T) {
	t.Parallel()
	sum := eachSeed(t, 8, func(t *testing.T, seed uint64) pathCounts { return compareLimitedPaths(t, seed, true) })
	if sum.reserved < 240 || sum.inherited < 40 || sum.paused < 40 || sum.weighted < 40 || sum.concBound < 40 ||
		sum.tenantConc-sum.concBound < 20 {
		t.Fatalf("the reserved claim took only %+v", sum)
	}
}

// TestReservedClaimSkipsTenantsAtConcurrency: the comparison above with
// only concurrency limits of a few jobs (tenants' own and defaults, for
// every queue or this one, and sometimes a queue rate), so that tenants
// are often at one: the reserved claim skips them and counts the throttled
// claim on their limits, as the general path does.
func TestReservedClaimSkipsTenantsAtConcurrency(t *testing.T) {
	t.Parallel()
	sum := eachSeed(t, 6, func(t *testing.T, seed uint64) pathCounts { return compareLimited(t, seed, true, true) })
	if sum.concSkipped < 20 {
		t.Fatalf("the reserved claim skipped tenants at a concurrency limit in only %d claims: %+v", sum.concSkipped, sum)
	}
}

// compareLimitedPaths runs the comparison of one seed and returns the
// claims the paths took (the callers check coverage over all seeds).
func compareLimitedPaths(t *testing.T, seed uint64, reserved bool) pathCounts {
	return compareLimited(t, seed, reserved, false)
}

// compareLimited is compareLimitedPaths; concOnly draws concurrency
// limits only.
func compareLimited(t *testing.T, seed uint64, reserved, concOnly bool) pathCounts {
	ctx := context.Background()
	fast, general := newTestStore(t, 2), newTestStore(t, 2)
	fast.oneRoundMode, general.oneRoundMode = oneRoundAlways, oneRoundNever
	fast.noReserve = !reserved
	stores := []*Store{fast, general}
	rng := rand.New(rand.NewPCG(seed, 7))
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tenants := []string{"t0", "t1", "t2", "t3", "t4", "t5"}
	insert := func(n int) {
		ps := make([]*store.JobInsertParams, n)
		for i := range ps {
			ps[i] = &store.JobInsertParams{Tenant: tenants[rng.IntN(len(tenants))], Queue: "q", Kind: "k",
				Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now, Priority: rng.IntN(3)}
		}
		for _, s := range stores {
			if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put := func(l store.Limit) {
		for _, s := range stores {
			if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: l, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	randomLimits := func() {
		periods := []time.Duration{time.Second, 10 * time.Second, time.Minute}
		if concOnly {
			if rng.IntN(2) == 0 {
				put(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 20 + rng.IntN(40), Period: periods[rng.IntN(3)]})
			}
			if rng.IntN(2) == 0 {
				put(store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: []string{"", "q"}[rng.IntN(2)]},
					Concurrency: 1 + rng.IntN(4)})
			}
			for _, tn := range tenants {
				if rng.IntN(3) == 0 {
					put(store.Limit{FlowScope: store.FlowScope{Tenant: tn, Queue: []string{"", "q"}[rng.IntN(2)]},
						Concurrency: 1 + rng.IntN(4)})
				}
			}
			return
		}
		if reserved {
			if rng.IntN(2) == 0 {
				put(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 10 + rng.IntN(40), Period: periods[rng.IntN(3)],
					Concurrency: rng.IntN(2) * (8 + rng.IntN(20))})
			}
			// Default rates (seed 002's "100 jobs/min per tenant"), for
			// every queue or this one: tenants without their own inherit.
			for _, q := range []string{"", "q"} {
				if rng.IntN(3) == 0 {
					put(store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: q}, Rate: 2 + rng.IntN(8),
						Period: periods[rng.IntN(3)]})
				}
			}
			// Default concurrencies, rarely: the reserved claim declines
			// while a tenant is at one. In half of the calls, all of the
			// tenants' concurrencies are too high to bind (the reserved
			// claim's bound decides without reading them).
			high := rng.IntN(2) == 0
			conc := func(low int) int {
				if high {
					return 20 + rng.IntN(30)
				}
				return low + rng.IntN(6)
			}
			if rng.IntN(4) == 0 {
				put(store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: []string{"", "q"}[rng.IntN(2)]},
					Concurrency: conc(3)})
			}
			for _, tn := range tenants {
				switch rng.IntN(5) {
				case 0:
					put(store.Limit{FlowScope: store.FlowScope{Tenant: tn}, Rate: 1 + rng.IntN(8), Period: periods[rng.IntN(3)],
						Weight: rng.IntN(2) * (1 + rng.IntN(4))})
				case 1:
					put(store.Limit{FlowScope: store.FlowScope{Tenant: tn, Queue: "q"}, Rate: 2 + rng.IntN(10), Period: periods[rng.IntN(3)]})
				case 2:
					put(store.Limit{FlowScope: store.FlowScope{Tenant: tn, Queue: []string{"", "q"}[rng.IntN(2)]}, Weight: 1 + rng.IntN(4)})
				case 3:
					// A tenant's own concurrency, with or without a rate.
					put(store.Limit{FlowScope: store.FlowScope{Tenant: tn, Queue: []string{"", "q"}[rng.IntN(2)]},
						Concurrency: conc(2), Rate: rng.IntN(2) * (5 + rng.IntN(10)), Period: time.Minute})
				}
			}
			return
		}
		if rng.IntN(2) == 0 {
			put(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 10 + rng.IntN(40), Period: periods[rng.IntN(3)]})
		}
		if rng.IntN(3) == 0 {
			put(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 8 + rng.IntN(20)})
		}
		switch rng.IntN(4) {
		case 0:
			put(store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: []string{"", "q"}[rng.IntN(2)]},
				Rate: 2 + rng.IntN(8), Period: periods[rng.IntN(3)]})
		case 1:
			put(store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: []string{"", "q"}[rng.IntN(2)]},
				Concurrency: 1 + rng.IntN(4)})
		}
		for _, tn := range tenants {
			switch rng.IntN(5) {
			case 0:
				put(store.Limit{FlowScope: store.FlowScope{Tenant: tn}, Rate: 1 + rng.IntN(8), Period: periods[rng.IntN(3)]})
			case 1:
				put(store.Limit{FlowScope: store.FlowScope{Tenant: tn}, Concurrency: 1 + rng.IntN(4)})
			case 2:
				put(store.Limit{FlowScope: store.FlowScope{Tenant: tn, Queue: "q"}, Rate: 2 + rng.IntN(10),
					Period: periods[rng.IntN(3)], Concurrency: 2 + rng.IntN(6)})
			}
		}
	}
	// Claims of up to 10; with concurrency limits of a few jobs, up to 4
	// (a visited tenant whose want exceeds its room sends the claim to the
	// general path).
	maxClaim := 10
	if concOnly {
		maxClaim = 4
	}
	insert(120)
	randomLimits()
	running := make([]map[int64]string, len(stores)) // id → lease token, per store
	for i := range running {
		running[i] = map[int64]string{}
	}
	for step := range 120 {
		p := store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1 + rng.IntN(maxClaim),
			LeaseUntil: now.Add(time.Hour), Now: now}
		if rng.IntN(8) == 0 {
			p.Tenant = tenants[rng.IntN(len(tenants))]
		}
		if step%2 == 0 { // every path gives the claim's own token, when named, to its jobs
			p.LeaseToken = fmt.Sprintf("claim-%d-%d", seed, step)
		}
		var ids [2][]int64
		var reports [2]store.ClaimReport
		before := limitState(t, general, now, tenants)
		for i, s := range stores {
			q := p
			q.Report = &reports[i]
			jobs, err := s.JobClaim(ctx, &q)
			if err != nil {
				t.Fatalf("step %d: claim: %v", step, err)
			}
			for _, j := range jobs {
				ids[i] = append(ids[i], j.ID)
				running[i][j.ID] = j.LeaseToken
				if p.LeaseToken != "" && j.LeaseToken != p.LeaseToken {
					t.Fatalf("step %d: job %d claimed under %q, want the claim's token %q", step, j.ID, j.LeaseToken, p.LeaseToken)
				}
			}
			slices.Sort(ids[i])
		}
		if !slices.Equal(ids[0], ids[1]) || reports[0] != reports[1] {
			t.Fatalf("step %d (limit %d, tenant %q, now %v): one round claimed %v, report %+v; general path %v, report %+v\nlimits after the one-round claim:\n%s\nafter the general path:\n%s",
				step, p.Limit, p.Tenant, now, ids[0], reports[0], ids[1], reports[1], limitState(t, fast, now, tenants)+fast.dumpReserved(), limitState(t, general, now, tenants))
		}
		// The rotation's cursor too: a path that moves it differently
		// claims other tenants' jobs only claims later.
		if a, b := fast.cursors.Get("q"), general.cursors.Get("q"); a != b {
			t.Fatalf("step %d (limit %d, tenant %q, now %v, claimed %v): rotation cursor after the one-round claim %q, after the general path %q; limits before the claim:\n%s",
				step, p.Limit, p.Tenant, now, ids[0], a, b, before)
		}
		if a, b := limitState(t, fast, now, tenants), limitState(t, general, now, tenants); a != b {
			t.Fatalf("step %d (limit %d, tenant %q, now %v, claimed %v): BEFORE\n%s\nlimits after the one-round claim:\n%s\nafter the general path:\n%s", step, p.Limit, p.Tenant, now, ids[0], before, a, b)
		}
		// Finish about half of the running jobs, the same ones in both,
		// drawn in id order (not the map's random order), so that a seed
		// is one sequence of claims on every run and a failure repeats.
		var done []int64
		for _, id := range slices.Sorted(maps.Keys(running[0])) {
			if rng.IntN(2) == 0 {
				done = append(done, id)
			}
		}
		for i, s := range stores {
			fins := make([]*store.JobFinishParams, len(done))
			for k, id := range done {
				fins[k] = &store.JobFinishParams{ID: id, LeaseToken: running[i][id], State: idemtype.StateCompleted,
					Outcome: idemtype.OutcomeCompleted, FinishedAt: now}
				delete(running[i], id)
			}
			if _, err := s.JobFinishMany(ctx, fins); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
		switch rng.IntN(12) {
		case 0:
			insert(30)
		case 1:
			randomLimits()
		case 2:
			ls, err := general.LimitList(ctx, &store.LimitListParams{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) > 0 {
				scope := ls[rng.IntN(len(ls))].FlowScope
				for _, s := range stores {
					if err := s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: scope}); err != nil {
						t.Fatal(err)
					}
				}
			}
		case 3, 4:
			// Pause or resume the queue (rarely) or a tenant's work in it.
			if !reserved {
				break
			}
			scope := store.FlowScope{Queue: "q"}
			if rng.IntN(4) > 0 {
				scope.Tenant = tenants[rng.IntN(len(tenants))]
			}
			pause := rng.IntN(2) == 0
			for _, s := range stores {
				var err error
				pp := &store.QueuePauseParams{Scope: scope}
				if pause {
					err = s.QueuePause(ctx, pp)
				} else {
					err = s.QueueResume(ctx, pp)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	c := pathCounts{took: fast.oneRoundTaken.Load(), declined: fast.oneRoundDeclined.Load(),
		reserved: fast.reservedTaken.Load(), inherited: fast.reservedInherited.Load(), paused: fast.reservedPaused.Load(),
		weighted: fast.reservedWeighted.Load(), tenantConc: fast.reservedConc.Load(), concBound: fast.reservedConcBound.Load(),
		concSkipped: fast.reservedConcSkipped.Load()}
	t.Logf("claims taken: %+v", c)
	return c
}

// limitState is every limit of s with its usage at now, then each tenant's
// limits (with its usage under default limits), as text.
func limitState(t *testing.T, s *Store, now time.Time, tenants []string) string {
	t.Helper()
	out := ""
	for _, tn := range append([]string{""}, tenants...) {
		ls, err := s.LimitList(context.Background(), &store.LimitListParams{Tenant: tn, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprintf("listed for %q:\n", tn)
		for _, l := range ls {
			out += fmt.Sprintf("  %s/%s rate %d/%s conc %d: running %d, window %s used %d, throttled %d\n",
				l.Tenant, l.Queue, l.Rate, l.Period, l.Concurrency, l.Running, l.WindowStart.Format(time.RFC3339Nano), l.WindowUsed, l.Throttled)
		}
	}
	return out
}

// Racing claimers that all try the one-round-trip claim never run more
// jobs at once than a concurrency limit nor start more in a window than a
// rate: 8 goroutines claim and finish from a backlog of 4 tenants under a
// queue concurrency, a tenant concurrency, a tenant rate and a default
// concurrency for the other tenants; every claim's jobs are counted while
// they run.
func TestLimitedClaimOneRoundRacing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, 10)
	// The one-round claim, not the reserved one (which now takes these
	// claims too; TestReservedClaimRacingStores races it).
	s.oneRoundMode, s.noReserve = oneRoundAlways, true
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC) // the rate's window is this minute
	var ps []*store.JobInsertParams
	for i := range 400 {
		ps = append(ps, &store.JobInsertParams{Tenant: fmt.Sprint("t", i%4), Queue: "q", Kind: "k",
			Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now})
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []store.Limit{
		{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 6},
		{FlowScope: store.FlowScope{Tenant: "t0"}, Concurrency: 3},
		{FlowScope: store.FlowScope{Tenant: "t1"}, Rate: 40, Period: time.Minute},
		// A default for every tenant: t0 and t1 have their own limit of
		// this queue scope, so it applies to t2 and t3, each on its own.
		{FlowScope: store.FlowScope{Tenant: store.EveryTenant}, Concurrency: 2},
	} {
		if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: l, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu                                      sync.Mutex
		runAll, runT0, maxAll, maxT0, startedT1 int
		runDefault, maxDefault                  = map[string]int{}, 0
		seen                                    = map[int64]bool{}
	)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each claimer holds its jobs until after its next claim, so
			// that the claimers together keep the limits saturated.
			var held []*idemtype.JobRow
			finish := func(jobs []*idemtype.JobRow) error {
				// The count goes up after the store counts a claimed job as
				// running and down before the store stops counting it, so it
				// is never above the store's own count: it can exceed a limit
				// only if the store did.
				mu.Lock()
				for _, j := range jobs {
					runAll--
					runDefault[j.Tenant]--
					if j.Tenant == "t0" {
						runT0--
					}
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
			for range 60 {
				jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: fmt.Sprint("w", w),
					Limit: 1 + w%4, LeaseUntil: now.Add(time.Hour), Now: now})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, j := range jobs {
					if seen[j.ID] {
						mu.Unlock()
						errs <- fmt.Errorf("job %d claimed twice", j.ID)
						return
					}
					seen[j.ID] = true
					runAll++
					if runDefault[j.Tenant]++; j.Tenant >= "t2" {
						maxDefault = max(maxDefault, runDefault[j.Tenant])
					}
					switch j.Tenant {
					case "t0":
						runT0++
					case "t1":
						startedT1++
					}
				}
				maxAll, maxT0 = max(maxAll, runAll), max(maxT0, runT0)
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
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("jobs %d, most running %d (limit 6), t0 %d (limit 3), t2 or t3 %d (default 2), t1 started %d (rate 40); one round took %d, declined %d",
		len(seen), maxAll, maxT0, maxDefault, startedT1, s.oneRoundTaken.Load(), s.oneRoundDeclined.Load())
	if maxAll > 6 || maxT0 > 3 || startedT1 > 40 || maxDefault > 2 {
		t.Fatalf("limits exceeded: most running %d (limit 6), t0 %d (limit 3), t2 or t3 %d (default 2), t1 started %d in one window (rate 40)",
			maxAll, maxT0, maxDefault, startedT1)
	}
	if startedT1 != 40 {
		t.Errorf("t1 started %d jobs, want its whole rate of 40 (it had 100 waiting)", startedT1)
	}
	if s.oneRoundTaken.Load() < 20 {
		t.Errorf("the one-round-trip claim took only %d claims", s.oneRoundTaken.Load())
	}
}

// A claim that a default limit throttles for two tenants counts one
// throttled claim on the default, also when the one-round-trip or the
// reserved claim took its first round (tenant a's copy spent: a is
// skipped) and the general path its later round (tenant b's copy binds
// b's second share): the rounds of one claim count a limit once, as the
// general path alone does. The default is a rate of 4 a minute or a
// concurrency of 4 (a's 4 jobs still run).
func TestLimitedClaimLaterRoundsCountDefaultOnce(t *testing.T) {
	t.Parallel()
	for _, reserved := range []bool{false, true} {
		for _, conc := range []bool{false, true} {
			t.Run(fmt.Sprint("reserved=", reserved, "/concurrency=", conc), func(t *testing.T) {
				def := store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant}, Rate: 4, Period: time.Minute}
				if conc {
					def = store.Limit{FlowScope: def.FlowScope, Concurrency: 4}
				}
				laterRoundsCountDefaultOnce(t, reserved, def)
			})
		}
	}
}

// laterRoundsCountDefaultOnce is one case of
// TestLimitedClaimLaterRoundsCountDefaultOnce: the first round taken by the
// reserved claim or the one-round-trip claim, under the default def.
func laterRoundsCountDefaultOnce(t *testing.T, reserved bool, def store.Limit) {
	ctx := context.Background()
	fast, general := newTestStore(t, 2), newTestStore(t, 2)
	fast.oneRoundMode, general.oneRoundMode = oneRoundAlways, oneRoundNever
	fast.noReserve = !reserved
	taken := func() int64 {
		if reserved {
			return fast.reservedTaken.Load()
		}
		return fast.oneRoundTaken.Load()
	}
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	jobs := func(tenant string, n int) []*store.JobInsertParams {
		ps := make([]*store.JobInsertParams, n)
		for i := range ps {
			ps[i] = &store.JobInsertParams{Tenant: tenant, Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now}
		}
		return ps
	}
	for _, s := range []*Store{fast, general} {
		if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: def, Now: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: jobs("a", 5), Now: now}); err != nil {
			t.Fatal(err)
		}
		// a spends its copy of the default: 4 of 4 (started in this
		// minute, running).
		if got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Tenant: "a", WorkerID: "w", Limit: 4,
			LeaseUntil: now.Add(time.Hour), Now: now}); err != nil || len(got) != 4 {
			t.Fatalf("claim of a: %d jobs, %v; want 4", len(got), err)
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: append(jobs("b", 10), jobs("c", 1)...), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	var reports [2]store.ClaimReport
	var ids [2][]int64
	before := taken()
	for i, s := range []*Store{fast, general} {
		// a is skipped (spent: one throttled claim); b and c get shares of
		// 3, c has 1 job; the later round gives b 1 of the 2 left (its copy
		// has 1 left: throttled again, but the claim is the same one).
		got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 6,
			LeaseUntil: now.Add(time.Hour), Now: now, Report: &reports[i]})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range got {
			ids[i] = append(ids[i], j.ID)
		}
		slices.Sort(ids[i])
	}
	if n := taken() - before; n != 1 {
		t.Fatalf("the first round's path (reserved %v) took %d claims, want 1 (the test no longer covers it)", reserved, n)
	}
	if !slices.Equal(ids[0], ids[1]) || reports[0] != reports[1] || len(ids[0]) != 5 {
		t.Fatalf("first round apart claimed %v, report %+v; general path %v, report %+v; want the same 5 jobs", ids[0], reports[0], ids[1], reports[1])
	}
	for i, s := range []*Store{fast, general} {
		ls, err := s.LimitList(ctx, &store.LimitListParams{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.IsDefault() && l.Throttled != 1 {
				t.Errorf("%s: the default limit counted %d throttled claims, want 1\n%s",
					[]string{"first round apart", "general path"}[i], l.Throttled, limitState(t, s, now, []string{"a", "b", "c"}))
			}
		}
	}
}
