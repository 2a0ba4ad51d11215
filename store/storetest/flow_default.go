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

// Default limits: scope tenant "*", one budget per tenant.
func flowDefaultCases() []testCase {
	return []testCase{
		{"Defaults/rate_gives_each_tenant_its_own_budget", testDefaultRate},
		{"Defaults/own_limit_replaces_the_default", testDefaultOverride},
		{"Defaults/concurrency_counts_per_tenant", testDefaultConcurrency},
		{"Defaults/star_is_not_a_job_tenant", testDefaultReserved},
		{"Defaults/listed_with_a_tenant_usage_and_deleted", testDefaultList},
		{"Defaults/throttled_counts_a_claim_once", testDefaultThrottledOnce},
		{"Defaults/rate_exact_under_racing_claimers", testDefaultRateRace},
		{"Defaults/concurrency_exact_under_racing_claimers", testDefaultConcurrencyRace},
		{"Limits/rotation_skips_spent_tenants_and_returns_to_refilled_ones", testLimitRotationRefill},
	}
}

var everyTenant = store.FlowScope{Tenant: store.EveryTenant}

// A default of 3 per hour for every tenant: each of three tenants starts 3
// jobs in the window (not 3 together), then nothing until the next window.
func testDefaultRate(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: everyTenant, Rate: 3, Period: time.Hour})
	for _, tenant := range []string{"a", "b", "c"} {
		insertTenant(t, s, tenant, 10)
	}
	got := byTenant(claim(t, s, at(time.Second), 20))
	if got["a"] != 3 || got["b"] != 3 || got["c"] != 3 {
		t.Fatalf("first claim took %v, want 3 of each tenant", got)
	}
	var r store.ClaimReport
	now := at(2 * time.Second)
	if n := len(claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 20,
		LeaseUntil: now.Add(lease), Now: now, Report: &r})); n != 0 {
		t.Fatalf("claim in the spent window: %d jobs, want 0", n)
	}
	if !r.Throttled {
		t.Errorf("claim held back by the default is not reported throttled")
	}
	wantTime(t, "NextRefill", r.NextRefill, base.Truncate(time.Hour).Add(time.Hour))
	// A new tenant has its own full budget in the same window, also when
	// the claim names it.
	insertTenant(t, s, "d", 10)
	if n := len(claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, Tenant: "d", WorkerID: "w", Limit: 20,
		LeaseUntil: now.Add(lease), Now: now})); n != 3 {
		t.Fatalf("claim of a new tenant d: %d jobs, want its own 3", n)
	}
	got = byTenant(claim(t, s, at(time.Hour), 40))
	for _, tenant := range []string{"a", "b", "c", "d"} {
		if got[tenant] != 3 {
			t.Fatalf("claim in the next window took %v, want 3 of each tenant", got)
		}
	}
}

// A tenant's own limit for the default's queue scope replaces the default
// for it; a limit for another queue scope does not.
func testDefaultOverride(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "default"}, Rate: 2, Period: time.Hour})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a", Queue: "default"}, Rate: 5, Period: time.Hour})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "c"}, Rate: 10, Period: time.Hour})
	for _, tenant := range []string{"a", "b", "c"} {
		insertTenant(t, s, tenant, 10)
	}
	got := byTenant(claim(t, s, at(time.Second), 30))
	got2 := byTenant(claim(t, s, at(2*time.Second), 30))
	for k, v := range got2 {
		got[k] += v
	}
	if got["a"] != 5 || got["b"] != 2 || got["c"] != 2 {
		t.Fatalf("claims took %v, want a:5 (its own limit) b:2 c:2 (the default: c's limit is for every queue)", got)
	}
	// The default of one queue leaves other queues alone.
	other := tenantJobs("b", 4)
	for _, p := range other {
		p.Queue = "other"
	}
	insertNew(t, s, at(0), other...)
	if n := len(claim(t, s, at(3*time.Second), 10, "other")); n != 4 {
		t.Fatalf("claim of another queue: %d jobs, want all 4", n)
	}
}

// A default concurrency of 2 counts each tenant's running jobs apart.
func testDefaultConcurrency(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "default"}, Concurrency: 2})
	insertTenant(t, s, "a", 5)
	insertTenant(t, s, "b", 5)
	jobs := claim(t, s, at(time.Second), 10)
	if got := byTenant(jobs); got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("first claim took %v, want 2 of each tenant", got)
	}
	if n := len(claim(t, s, at(time.Second), 10)); n != 0 {
		t.Fatalf("claim with both tenants at their concurrency: %d jobs, want 0", n)
	}
	var a *idemtype.JobRow
	for _, j := range jobs {
		if j.Tenant == "a" {
			a = j
		}
	}
	finish1(t, s, completion(a, `1`, at(2*time.Second)))
	if got := byTenant(claim(t, s, at(3*time.Second), 10)); got["a"] != 1 || got["b"] != 0 {
		t.Fatalf("claim after one of a's jobs finished took %v, want a:1", got)
	}
}

// "*" is refused as a job's tenant (nothing stored) and as a pause scope;
// a default limit has no weight.
func testDefaultReserved(t *testing.T, s store.Store) {
	ctx := t.Context()
	ps := tenantJobs("a", 2)
	ps[1].Tenant = store.EveryTenant
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: at(0)})
	if err == nil {
		for _, r := range res {
			err = r.Err
		}
	}
	wantInvalidField(t, "insert of a job of tenant *", err, "tenant")
	jobs, _, err := s.JobList(ctx, &store.JobListParams{Limit: 10})
	wantOK(t, "JobList", err)
	if len(jobs) != 0 {
		t.Fatalf("a refused batch stored %d jobs", len(jobs))
	}
	wantInvalidField(t, "pause of tenant *", s.QueuePause(ctx, &store.QueuePauseParams{Scope: store.FlowScope{Tenant: store.EveryTenant, Queue: "q"}}), "tenant")
	_, err = s.LimitPut(ctx, &store.LimitPutParams{Limit: store.Limit{FlowScope: everyTenant, Weight: 2}})
	wantInvalidField(t, "weight of tenant *", err, "weight")
	ls, err := s.LimitList(ctx, &store.LimitListParams{})
	wantOK(t, "LimitList", err)
	if len(ls) != 0 {
		t.Errorf("refused limits stored: %v", ls)
	}
}

// LimitList shows the default; asked for one tenant, with that tenant's
// usage unless it has its own limit; deleting it lifts the limit.
func testDefaultList(t *testing.T, s store.Store) {
	ctx := t.Context()
	putLimit(t, s, store.Limit{FlowScope: everyTenant, Rate: 4, Period: time.Hour, Concurrency: 9})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "b"}, Rate: 1, Period: time.Hour})
	insertTenant(t, s, "a", 10)
	insertTenant(t, s, "b", 10)
	claim(t, s, at(time.Second), 3)
	now := at(2 * time.Second)
	ls, err := s.LimitList(ctx, &store.LimitListParams{Now: now})
	wantOK(t, "LimitList", err)
	if len(ls) != 2 || ls[0].Tenant != store.EveryTenant || ls[0].Rate != 4 || ls[0].Concurrency != 9 || ls[1].Tenant != "b" {
		t.Fatalf("LimitList = %v, want the default and b's limit", ls)
	}
	mine, err := s.LimitList(ctx, &store.LimitListParams{Tenant: "a", Now: now})
	wantOK(t, "LimitList(a)", err)
	if len(mine) != 1 || mine[0].Tenant != store.EveryTenant || mine[0].WindowUsed != 2 || mine[0].Running != 2 {
		t.Fatalf("LimitList(a) = %+v, want the default with a's 2 started and running", mine)
	}
	theirs, err := s.LimitList(ctx, &store.LimitListParams{Tenant: "b", Now: now})
	wantOK(t, "LimitList(b)", err)
	if len(theirs) != 1 || theirs[0].Tenant != "b" || theirs[0].WindowUsed != 1 {
		t.Fatalf("LimitList(b) = %+v, want b's own limit only", theirs)
	}
	wantOK(t, "LimitDelete *", s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: everyTenant}))
	if got := byTenant(claim(t, s, at(3*time.Second), 20)); got["a"] != 8 {
		t.Fatalf("claim after deleting the default took %v, want a's 8 left", got)
	}
	// Put again: the windows of the deleted default are gone.
	putLimit(t, s, store.Limit{FlowScope: everyTenant, Rate: 4, Period: time.Hour})
	insertTenant(t, s, "a", 10)
	if got := byTenant(claim(t, s, at(4*time.Second), 20)); got["a"] != 4 {
		t.Fatalf("claim under a new default took %v, want a:4", got)
	}
}

// A claim that the default holds back for two tenants (a's copy spent, so
// a is skipped; b's copy binds b's second round) counts one throttled claim
// on the default and one on each of those tenants' windows, not one per
// round: Limit.Throttled counts claims.
func testDefaultThrottledOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	putLimit(t, s, store.Limit{FlowScope: everyTenant, Rate: 4, Period: time.Hour})
	insertTenant(t, s, "a", 5)
	now := at(time.Second)
	if n := len(claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, Tenant: "a", WorkerID: "w", Limit: 4,
		LeaseUntil: now.Add(lease), Now: now})); n != 4 {
		t.Fatalf("claim of a: %d jobs, want its 4", n)
	}
	insertTenant(t, s, "b", 10)
	insertTenant(t, s, "c", 1)
	// Shares of 3: b 3, c its 1; then b 1 of the 2 left (its copy's last).
	if got := byTenant(claim(t, s, now, 6)); got["a"] != 0 || got["b"] != 4 || got["c"] != 1 {
		t.Fatalf("claim took %v, want b:4 c:1", got)
	}
	ls, err := s.LimitList(ctx, &store.LimitListParams{Now: now})
	wantOK(t, "LimitList", err)
	if len(ls) != 1 || ls[0].Throttled != 1 {
		t.Fatalf("LimitList = %s, want the default with 1 throttled claim", fmtThrottled(ls))
	}
	for tenant, want := range map[string]int64{"a": 1, "b": 1, "c": 0} {
		mine, err := s.LimitList(ctx, &store.LimitListParams{Tenant: tenant, Now: now})
		wantOK(t, "LimitList("+tenant+")", err)
		if len(mine) != 1 || mine[0].Throttled != want {
			t.Errorf("LimitList(%s) = %s, want the default with %d throttled claims of %s", tenant, fmtThrottled(mine), want, tenant)
		}
	}
}

// fmtThrottled shows each limit's scope and throttled count.
func fmtThrottled(ls []*store.Limit) string {
	out := "["
	for i, l := range ls {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s/%s throttled %d", l.Tenant, l.Queue, l.Throttled)
	}
	return out + "]"
}

// 8 claimers race in one window over 4 tenants under a default of 7: each
// tenant starts exactly 7.
func testDefaultRateRace(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: everyTenant, Rate: 7, Period: time.Minute})
	tenants := []string{"a", "b", "c", "d"}
	for _, tenant := range tenants {
		insertTenant(t, s, tenant, 50)
	}
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	err := parallel(8, func(g int) error {
		for range 10 {
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 3, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			mu.Lock()
			for _, j := range jobs {
				got[j.Tenant]++
			}
			mu.Unlock()
		}
		return nil
	})
	wantOK(t, "claimers", err)
	for _, tenant := range tenants {
		if got[tenant] != 7 {
			t.Fatalf("racing claimers took %v in one window, want 7 of each tenant", got)
		}
	}
}

// 8 claimers finish what they claim and claim again under a default
// concurrency of 3: no tenant ever has more than 3 running (as the
// claimers count them), and every job runs once.
func testDefaultConcurrencyRace(t *testing.T, s store.Store) {
	const perTenant, limit = 100, 3
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "default"}, Concurrency: limit})
	insertTenant(t, s, "a", perTenant)
	insertTenant(t, s, "b", perTenant)
	var (
		mu      sync.Mutex
		running = map[string]int{}
		most    = map[string]int{}
		seen    = map[int64]int{}
		done    atomic.Int64
	)
	err := parallel(8, func(g int) error {
		for done.Load() < 2*perTenant {
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 4, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				continue
			}
			fins := make([]*store.JobFinishParams, len(jobs))
			mu.Lock()
			for i, j := range jobs {
				seen[j.ID]++
				running[j.Tenant]++
				most[j.Tenant] = max(most[j.Tenant], running[j.Tenant])
				fins[i] = completion(j, `1`, at(2*time.Second))
			}
			mu.Unlock()
			mu.Lock()
			for _, j := range jobs { // before the finish commits: never overcounts
				running[j.Tenant]--
			}
			mu.Unlock()
			if err := finishEach(t, s, fins); err != nil {
				return err
			}
			done.Add(int64(len(jobs)))
		}
		return nil
	})
	wantOK(t, "claimers", err)
	for tenant, m := range most {
		if m > limit {
			t.Errorf("tenant %s had %d jobs running at once, default concurrency %d", tenant, m, limit)
		}
	}
	if len(seen) != 2*perTenant {
		t.Errorf("%d distinct jobs ran, want %d", len(seen), 2*perTenant)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
}

// wantInvalidField fails unless err is an *idemtype.InvalidError naming field.
func wantInvalidField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ie *idemtype.InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, idemtype.ErrInvalid) || ie.Field != field {
		t.Fatalf("%s: %v, want invalid %s", what, err, field)
	}
}

// Twelve tenants with a rate of 1 per hour each, claims of 5: the claims
// of one window visit five new tenants, then five, then the last two (the
// others spent); in the next window every tenant is back in the rotation
// at once, from the cursor on.
func testLimitRotationRefill(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: everyTenant, Rate: 1, Period: time.Hour})
	for i := range 12 {
		insertTenant(t, s, fmt.Sprintf("t%02d", i), 3)
	}
	for round, want := range []int{5, 5, 2, 0} {
		got := byTenant(claim(t, s, at(time.Second), 5))
		if len(got) != want {
			t.Fatalf("round %d in the first window visited %v, want %d tenants", round, got, want)
		}
		for tenant, n := range got {
			if n != 1 {
				t.Fatalf("round %d: tenant %s started %d jobs, rate 1", round, tenant, n)
			}
		}
	}
	seen := map[string]bool{}
	for round := range 2 {
		got := byTenant(claim(t, s, at(time.Hour), 5))
		if len(got) != 5 {
			t.Fatalf("round %d in the next window visited %v, want 5 refilled tenants", round, got)
		}
		for tenant := range got {
			if seen[tenant] {
				t.Fatalf("tenant %s visited twice in one window", tenant)
			}
			seen[tenant] = true
		}
	}
}
