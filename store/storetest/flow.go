package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func flowCases() []testCase {
	return []testCase{
		{"Fairness/small_tenant_starts_in_first_rounds", testFairSmallTenant},
		{"Fairness/rounds_rotate_through_many_tenants", testFairRotation},
		{"Fairness/priority_order_within_a_tenant", testFairPriorityWithinTenant},
		{"Fairness/weights_share_claims", testFairWeights},
		{"Fairness/new_tenants_join_the_next_claim", testFairNewTenants},
		{"Fairness/claim_without_work_keeps_the_rotation", testFairEmptyClaimKeepsRotation},
		{"Fairness/tenant_past_the_claims_limit_gets_its_turn", testFairShareCutByLimit},
		{"Fairness/default_concurrency_rotation_progresses", testFairDefaultConcurrencyProgress},
		{"Fairness/empty_tenant_under_queue_limit_leaves_room_to_others", testFairEmptyTenantUnderQueueLimit},
		{"Fairness/tenant_left_out_by_the_claims_limit_fills_the_rest", testFairClaimLimitLeftOutTenantFillsRest},
		{"Limits/put_list_delete", testLimitCRUD},
		{"Limits/period_echoed_as_stored", testLimitPeriodEcho},
		{"Limits/invalid_scope_and_values", testLimitInvalid},
		{"Limits/rate_holds_per_window_and_reports_refill", testLimitRateWindow},
		{"Limits/rate_shared_by_concurrent_claimers", testLimitRateRace},
		{"Limits/concurrency_never_exceeded_by_racing_claimers", testLimitConcurrencyRace},
		{"Limits/throttled_tenant_does_not_block_others", testLimitTenantIsolation},
		{"Limits/queue_limit_caps_all_tenants", testLimitQueueWide},
		{"Limits/concurrency_counts_only_its_scope", testLimitConcurrencyScope},
		{"Limits/take_effect_from_the_next_claim", testLimitNextClaim},
		{"Pause/queue_and_tenant_in_queue", testPause},
		{"Pause/toggling_under_load_loses_nothing", testPauseRace},
		{"Limits/concurrency_across_queues_never_exceeded_by_racing_claimers", testLimitConcurrencyAcrossQueuesRace},
		{"Limits/concurrency_alone_reports_no_refill", testLimitConcurrencyReportsNoRefill},
		{"Limits/partly_spent_rate_throttles_only_a_filled_quota", testThrottlePartlySpent},
	}
}

// tenantJobs returns n insert params of tenant in queue "default".
func tenantJobs(tenant string, n int) []*store.JobInsertParams {
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = newJob("k")
		ps[i].Tenant = tenant
	}
	return ps
}

// insertTenant inserts n jobs of tenant in batches of 1,000.
func insertTenant(t *testing.T, s store.Store, tenant string, n int) {
	t.Helper()
	for n > 0 {
		b := min(n, 1000)
		insertNew(t, s, at(0), tenantJobs(tenant, b)...)
		n -= b
	}
}

func putLimit(t *testing.T, s store.Store, l store.Limit) {
	t.Helper()
	if _, err := s.LimitPut(t.Context(), &store.LimitPutParams{Limit: l, Now: at(0)}); err != nil {
		t.Fatalf("LimitPut(%+v): %v", l, err)
	}
}

func byTenant(jobs []*idemtype.JobRow) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[j.Tenant]++
	}
	return out
}

// A tenant with 10,000 queued jobs does not delay one with 10: the small
// tenant's jobs all start within the first two claim rounds of 10.
func testFairSmallTenant(t *testing.T, s store.Store) {
	insertTenant(t, s, "big", 10000)
	insertTenant(t, s, "small", 10)
	small := 0
	for round := 1; round <= 2; round++ {
		small += byTenant(claim(t, s, at(time.Second), 10))["small"]
	}
	if small != 10 {
		t.Fatalf("small tenant: %d of 10 jobs started in the first 2 rounds", small)
	}
	if got := len(claim(t, s, at(time.Second), 10)); got != 10 {
		t.Fatalf("round 3 claimed %d jobs, want 10 (the big tenant's)", got)
	}
}

// 30 tenants with 5 jobs each: rounds of 10 visit 10 new tenants each, so
// every tenant has started a job after 3 rounds.
func testFairRotation(t *testing.T, s store.Store) {
	for i := range 30 {
		insertNew(t, s, at(0), tenantJobs(fmt.Sprintf("t%02d", i), 5)...)
	}
	seen := map[string]bool{}
	for round := range 3 {
		got := byTenant(claim(t, s, at(time.Second), 10))
		if len(got) != 10 {
			t.Fatalf("round %d visited %d tenants, want 10: %v", round, len(got), got)
		}
		for tenant := range got {
			if seen[tenant] {
				t.Fatalf("round %d visited %s again before every tenant had a turn", round, tenant)
			}
			seen[tenant] = true
		}
	}
}

func testFairPriorityWithinTenant(t *testing.T, s store.Store) {
	ps := tenantJobs("a", 3)
	ps[2].Priority = 5
	js := insertNew(t, s, at(0), ps...)
	got := claim(t, s, at(time.Second), 1)
	wantIDs(t, "first claim", ids(got), []int64{js[2].ID})
	wantIDs(t, "second claim", ids(claim(t, s, at(time.Second), 5)), []int64{js[0].ID, js[1].ID})
}

// Tenant a has weight 3, b the default 1: a claim of 8 gives a 6, b 2.
func testFairWeights(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Weight: 3})
	insertTenant(t, s, "a", 20)
	insertTenant(t, s, "b", 20)
	if got := byTenant(claim(t, s, at(time.Second), 8)); got["a"] != 6 || got["b"] != 2 {
		t.Fatalf("claim of 8 took %v, want a:6 b:2", got)
	}
	_, err := s.LimitPut(t.Context(), &store.LimitPutParams{Limit: store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Weight: 2}})
	wantErr(t, "a queue weight", err, idemtype.ErrInvalid)
	ls, err := s.LimitList(t.Context(), &store.LimitListParams{})
	wantOK(t, "LimitList", err)
	if len(ls) != 1 || ls[0].Weight != 3 {
		t.Fatalf("LimitList = %v, want the weight of a", ls)
	}
}

func testLimitCRUD(t *testing.T, s store.Store) {
	ctx := t.Context()
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "acme"}, Rate: 100, Period: time.Minute})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: 1000, Period: time.Minute, Concurrency: 3})
	insertNew(t, s, at(0), tenantJobs("acme", 3)...)
	claim(t, s, at(time.Second), 2)
	ls, err := s.LimitList(ctx, &store.LimitListParams{Now: at(2 * time.Second)})
	wantOK(t, "LimitList", err)
	if len(ls) != 2 {
		t.Fatalf("LimitList: %d limits, want 2", len(ls))
	}
	acme, queue := ls[1], ls[0] // ordered by (tenant, queue): "" < "acme"
	if acme.Tenant != "acme" || acme.Rate != 100 || acme.Period != time.Minute || acme.WindowUsed != 2 {
		t.Errorf("tenant limit = %+v, want acme 100/1m with 2 used", acme)
	}
	if queue.Queue != "default" || queue.Concurrency != 3 || queue.Running != 2 || queue.WindowUsed != 2 {
		t.Errorf("queue limit = %+v, want default concurrency 3 with 2 running", queue)
	}
	mine, err := s.LimitList(ctx, &store.LimitListParams{Tenant: "acme", Now: at(2 * time.Second)})
	wantOK(t, "LimitList(acme)", err)
	if len(mine) != 1 {
		t.Errorf("LimitList(acme): %d limits, want 1", len(mine))
	}
	wantOK(t, "LimitDelete", s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: store.FlowScope{Tenant: "acme"}}))
	wantErr(t, "LimitDelete again", s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: store.FlowScope{Tenant: "acme"}}), idemtype.ErrNotFound)
	// A pause of the same scope survives the deletion of its limit.
	wantOK(t, "QueuePause", s.QueuePause(ctx, &store.QueuePauseParams{Scope: store.FlowScope{Queue: "default"}}))
	wantOK(t, "LimitDelete queue", s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: store.FlowScope{Queue: "default"}}))
	paused, err := s.QueuePauseList(ctx)
	wantOK(t, "QueuePauseList", err)
	if len(paused) != 1 || paused[0].Queue != "default" {
		t.Errorf("QueuePauseList = %v, want the default queue", paused)
	}
	ls, err = s.LimitList(ctx, &store.LimitListParams{Now: at(2 * time.Second)})
	wantOK(t, "LimitList", err)
	if len(ls) != 0 {
		t.Errorf("LimitList after deletes: %d limits, want 0", len(ls))
	}
}

// testLimitPeriodEcho: a rate period is kept in whole microseconds, and
// LimitPut returns the period kept (1.5s and 500ns is 1.5s), the one
// LimitList shows, not the one it was given.
func testLimitPeriodEcho(t *testing.T, s store.Store) {
	ctx := t.Context()
	const given, kept = 1500*time.Millisecond + 500*time.Nanosecond, 1500 * time.Millisecond
	got, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: store.Limit{FlowScope: store.FlowScope{Tenant: "acme"}, Rate: 5, Period: given}, Now: at(0)})
	wantOK(t, "LimitPut", err)
	if got.Period != kept || got.Rate != 5 {
		t.Errorf("LimitPut echoed %+v, want the rate 5 per %v as kept", got, kept)
	}
	ls, err := s.LimitList(ctx, &store.LimitListParams{Now: at(0)})
	wantOK(t, "LimitList", err)
	if len(ls) != 1 || ls[0].Period != kept {
		t.Fatalf("LimitList = %+v, want one limit per %v", ls, kept)
	}
}

func testLimitInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	cases := []struct {
		l     store.Limit
		field string
	}{
		{store.Limit{Rate: 1, Period: time.Second}, "scope"},
		{store.Limit{FlowScope: store.FlowScope{Tenant: "a"}}, "rate"},
		{store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Rate: 1}, "rate"},
		{store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Concurrency: -1}, "concurrency"},
	}
	for _, c := range cases {
		_, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: c.l})
		var ie *idemtype.InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("LimitPut(%+v) = %v, want invalid %s", c.l, err, c.field)
		}
	}
	wantErr(t, "QueuePause without queue", s.QueuePause(ctx, &store.QueuePauseParams{Scope: store.FlowScope{Tenant: "a"}}), idemtype.ErrInvalid)
	ls, err := s.LimitList(ctx, &store.LimitListParams{})
	wantOK(t, "LimitList", err)
	if len(ls) != 0 {
		t.Errorf("invalid limits stored: %v", ls)
	}
}

// Rate 10 per minute: one window's claims take 10, the next claim in the
// window none (throttled, refill at the window's end), the next window 10.
func testLimitRateWindow(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: 10, Period: time.Minute})
	insertTenant(t, s, "a", 50)
	var r store.ClaimReport
	claimR := func(now time.Time) int {
		jobs := claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 100,
			LeaseUntil: now.Add(lease), Now: now, Report: &r})
		return len(jobs)
	}
	if n := claimR(at(0)); n != 10 {
		t.Fatalf("first claim: %d jobs, want 10", n)
	}
	if !r.Throttled {
		t.Errorf("first claim left work behind but Report.Throttled is false")
	}
	end := base.Truncate(time.Minute).Add(time.Minute)
	wantTime(t, "NextRefill", r.NextRefill, end)
	if n := claimR(end.Add(-time.Microsecond)); n != 0 {
		t.Fatalf("claim at the window's end: %d jobs, want 0", n)
	}
	if n := claimR(end); n != 10 {
		t.Fatalf("claim in the next window: %d jobs, want 10", n)
	}
	// A claim whose Now lags behind (another node's clock, a wait for the
	// lock) does not reopen the window that has passed.
	if n := claimR(end.Add(-time.Second)); n != 0 {
		t.Fatalf("lagging claim in a passed window: %d jobs, want 0", n)
	}
	got := wantState(t, s, mustFirstAvailable(t, s), idemtype.StateAvailable)
	if got.Attempt != 0 {
		t.Errorf("a throttled job has attempt %d, want 0", got.Attempt)
	}
}

// mustFirstAvailable returns the id of an available job.
func mustFirstAvailable(t *testing.T, s store.Store) int64 {
	t.Helper()
	jobs, _, err := s.JobList(t.Context(), &store.JobListParams{Filter: store.JobFilter{States: []idemtype.JobState{idemtype.StateAvailable}}, Limit: 1})
	wantOK(t, "JobList", err)
	if len(jobs) == 0 {
		t.Fatal("no available job")
	}
	return jobs[0].ID
}

// 8 claimers racing in one window together take exactly the rate, each
// job once.
func testLimitRateRace(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Rate: 25, Period: time.Minute})
	insertTenant(t, s, "a", 200)
	var total atomic.Int64
	set := newClaimSet()
	err := parallel(8, func(g int) error {
		for range 10 {
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 3, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			total.Add(int64(len(jobs)))
			set.add(jobs)
		}
		return nil
	})
	wantOK(t, "claimers", err)
	if n := total.Load(); n != 25 {
		t.Fatalf("racing claimers took %d jobs in one window, want the rate 25", n)
	}
	if len(set.seen) != 25 {
		t.Fatalf("racing claimers took %d distinct jobs, want 25", len(set.seen))
	}
}

// 8 claimers finish what they claim and claim again; the most jobs of the
// tenant running at once (as the claimers count them) never passes the
// limit, and every job runs exactly once.
func testLimitConcurrencyRace(t *testing.T, s store.Store) {
	const total, limit = 300, 5
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a", Queue: "default"}, Concurrency: limit})
	insertTenant(t, s, "a", total)
	var (
		running, most atomic.Int64
		mu            sync.Mutex
		seen          = map[int64]int{}
		done          atomic.Int64
	)
	err := parallel(8, func(g int) error {
		for done.Load() < total {
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 3, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			n := running.Add(int64(len(jobs)))
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			fins := make([]*store.JobFinishParams, len(jobs))
			mu.Lock()
			for i, j := range jobs {
				seen[j.ID]++
				fins[i] = completion(j, `1`, at(2*time.Second))
			}
			mu.Unlock()
			if len(jobs) == 0 {
				continue
			}
			running.Add(-int64(len(jobs))) // before the finish commits: never undercounts
			if err := finishEach(t, s, fins); err != nil {
				return err
			}
			done.Add(int64(len(jobs)))
		}
		return nil
	})
	wantOK(t, "claimers", err)
	if m := most.Load(); m > limit {
		t.Errorf("%d jobs ran at once, limit %d", m, limit)
	}
	if len(seen) != total {
		t.Errorf("%d distinct jobs ran, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
}

// A tenant whose rate is spent does not hold back another tenant.
func testLimitTenantIsolation(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Rate: 1, Period: time.Minute})
	insertTenant(t, s, "a", 100)
	insertTenant(t, s, "b", 5)
	got := byTenant(claim(t, s, at(time.Second), 10))
	if got["a"] != 1 || got["b"] != 5 {
		t.Fatalf("claim took %v, want a:1 b:5", got)
	}
	got = byTenant(claim(t, s, at(2*time.Second), 10))
	if len(got) != 0 {
		t.Fatalf("claim took %v, want nothing (a throttled, b done)", got)
	}
}

// A queue limit counts every tenant's jobs together.
func testLimitQueueWide(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: 7, Period: time.Hour})
	for _, tenant := range []string{"a", "b", "c"} {
		insertTenant(t, s, tenant, 10)
	}
	if n := len(claim(t, s, at(time.Second), 10)) + len(claim(t, s, at(2*time.Second), 10)); n != 7 {
		t.Fatalf("claims took %d jobs, want the queue's rate 7", n)
	}
}

// A concurrency limit counts the running jobs of its scope and no others:
// for a tenant, a queue and a tenant in a queue, two jobs run in every
// (tenant, queue) outside the scope, then a claim in the scope takes the
// limit of 2, the next nothing, and one more after one of them finished.
func testLimitConcurrencyScope(t *testing.T, s store.Store) {
	for i, scope := range []store.FlowScope{{Tenant: "a"}, {Queue: "q"}, {Tenant: "a", Queue: "q"}} {
		// Each scope claims from queues of its own, so that what a store
		// remembers of a queue's earlier claims (hints) does not carry over.
		q := fmt.Sprint("q", i)
		if scope.Queue != "" {
			scope.Queue = q
		}
		t.Run(fmt.Sprintf("tenant=%q queue=%q", scope.Tenant, scope.Queue), func(t *testing.T) {
			ctx := context.Background()
			base := at(time.Duration(len(scope.Tenant)+2*len(scope.Queue)) * time.Hour)
			putLimit(t, s, store.Limit{FlowScope: scope, Concurrency: 2})
			defer func() {
				if err := s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: scope}); err != nil {
					t.Fatal(err)
				}
			}()
			claimOf := func(tenant, queue string, limit int) []*idemtype.JobRow {
				t.Helper()
				jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, Tenant: tenant, WorkerID: "w",
					Limit: limit, LeaseUntil: base.Add(time.Hour), Now: base})
				if err != nil {
					t.Fatal(err)
				}
				return jobs
			}
			var running []*idemtype.JobRow
			for _, tenant := range []string{"a", "b"} {
				for _, queue := range []string{q, q + "-other"} {
					if (scope.Tenant == "" || scope.Tenant == tenant) && (scope.Queue == "" || scope.Queue == queue) {
						continue
					}
					for range 2 {
						p := newJob("scope")
						p.Tenant, p.Queue, p.RunAt = tenant, queue, base
						insertAll(t, s, base, p)
					}
					running = append(running, claimOf(tenant, queue, 10)...)
				}
			}
			in := make([]*store.JobInsertParams, 5)
			for i := range in {
				in[i] = newJob("scope")
				in[i].Tenant, in[i].Queue, in[i].RunAt = "a", q, base
			}
			insertAll(t, s, base, in...)
			// A tenant's limit for every queue counts its jobs running in
			// another queue too.
			wants := []int{1, 1, 0}
			if scope.Queue == "" {
				p := newJob("scope")
				p.Tenant, p.Queue, p.RunAt = "a", q+"-side", base
				insertAll(t, s, base, p)
				side := claimOf("a", q+"-side", 10)
				if len(side) != 1 {
					t.Fatalf("claimed %d of a's job in another queue, want 1", len(side))
				}
				running = append(running, side...)
				wants = []int{1, 0, 0}
			}
			// Claims of one job each (a claim that fits the budget as a
			// whole) and of ten (more than the limit).
			var jobs []*idemtype.JobRow
			for i, want := range wants {
				got := claimOf("a", q, 1)
				if len(got) != want {
					t.Fatalf("claim %d of one job took %d under concurrency 2, want %d (%d jobs running outside the scope must not count)",
						i+1, len(got), want, len(running))
				}
				jobs = append(jobs, got...)
			}
			if got := len(claimOf("a", q, 10)); got != 0 {
				t.Fatalf("claimed %d with the scope's 2 running", got)
			}
			finish1(t, s, completion(jobs[0], `1`, base))
			more := claimOf("a", q, 10)
			if len(more) != 1 {
				t.Fatalf("claimed %d after one of 2 finished, want 1", len(more))
			}
			// Leave nothing running for the next scope.
			for _, j := range append(append(running, jobs[1:]...), more...) {
				finish1(t, s, completion(j, `1`, base))
			}
			for _, j := range claimOf("a", q, 10) {
				finish1(t, s, completion(j, `1`, base))
			}
		})
	}
}

func testPause(t *testing.T, s store.Store) {
	ctx := t.Context()
	insertTenant(t, s, "a", 3)
	insertTenant(t, s, "b", 3)
	queue := store.FlowScope{Queue: "default"}
	wantOK(t, "pause", s.QueuePause(ctx, &store.QueuePauseParams{Scope: queue}))
	wantOK(t, "pause twice", s.QueuePause(ctx, &store.QueuePauseParams{Scope: queue}))
	if got := claim(t, s, at(time.Second), 10); len(got) != 0 {
		t.Fatalf("claim of a paused queue took %d jobs", len(got))
	}
	wantOK(t, "resume", s.QueueResume(ctx, &store.QueuePauseParams{Scope: queue}))
	wantOK(t, "pause a", s.QueuePause(ctx, &store.QueuePauseParams{Scope: store.FlowScope{Tenant: "a", Queue: "default"}}))
	if got := byTenant(claim(t, s, at(time.Second), 10)); got["a"] != 0 || got["b"] != 3 {
		t.Fatalf("claim with tenant a paused took %v, want b:3", got)
	}
	wantOK(t, "resume a", s.QueueResume(ctx, &store.QueuePauseParams{Scope: store.FlowScope{Tenant: "a", Queue: "default"}}))
	if got := byTenant(claim(t, s, at(time.Second), 10)); got["a"] != 3 {
		t.Fatalf("claim after resume took %v, want a:3", got)
	}
	paused, err := s.QueuePauseList(ctx)
	wantOK(t, "QueuePauseList", err)
	if len(paused) != 0 {
		t.Errorf("QueuePauseList after resumes = %v, want none", paused)
	}
}

// Claimers finish what they claim while another goroutine pauses and
// resumes the queue: every job runs exactly once, none while paused.
func testPauseRace(t *testing.T, s store.Store) {
	const total = 400
	insertTenant(t, s, "a", total/2)
	insertTenant(t, s, "b", total/2)
	var (
		mu     sync.Mutex // held by the toggler while the queue is paused
		seen   = map[int64]int{}
		seenMu sync.Mutex
		done   atomic.Int64
	)
	scope := &store.QueuePauseParams{Scope: store.FlowScope{Queue: "default"}}
	err := parallel(5, func(g int) error {
		if g == 0 { // the toggler
			for i := 0; done.Load() < total; i++ {
				mu.Lock()
				if err := s.QueuePause(t.Context(), scope); err != nil {
					mu.Unlock()
					return err
				}
				// While paused (and the lock held), no claim may return work.
				jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
					WorkerID: "toggler", Limit: 10, LeaseUntil: at(time.Hour), Now: at(time.Second)})
				if err == nil && len(jobs) > 0 {
					err = fmt.Errorf("a claim of the paused queue took %d jobs", len(jobs))
				}
				if err == nil {
					err = s.QueueResume(t.Context(), scope)
				}
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			return nil
		}
		for done.Load() < total {
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 4, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			fins := make([]*store.JobFinishParams, len(jobs))
			seenMu.Lock()
			for i, j := range jobs {
				seen[j.ID]++
				fins[i] = completion(j, `1`, at(2*time.Second))
			}
			seenMu.Unlock()
			if len(jobs) == 0 {
				continue
			}
			if _, err := s.JobFinishMany(t.Context(), fins); err != nil {
				return err
			}
			done.Add(int64(len(jobs)))
		}
		return nil
	})
	wantOK(t, "claimers", err)
	if len(seen) != total {
		t.Errorf("%d distinct jobs ran, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
}

// Flow control changes between claims of the same store take effect on
// the very next claim, in both directions: a store may remember that a
// queue had no flow-control rows (PostgreSQL's one round-trip claim) but
// must never act on it.
func testLimitNextClaim(t *testing.T, s store.Store) {
	insertTenant(t, s, "a", 12)
	insertTenant(t, s, "b", 2)
	now := at(time.Second)
	total := 0
	got := byTenant(claim(t, s, now, 2))
	if total = got["a"] + got["b"]; total != 2 {
		t.Fatalf("claim without limits: %v, want 2 jobs", got)
	}
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Rate: 3, Period: time.Hour})
	got = byTenant(claim(t, s, now, 20))
	if got["a"] != 3 {
		t.Fatalf("claim right after a rate of 3 on tenant a: %v, want 3 of a", got)
	}
	total += got["a"] + got["b"]
	if n := len(claim(t, s, now, 20)); n != 0 {
		t.Fatalf("claim of a spent rate (b's work all taken): %d jobs, want 0", n)
	}
	if err := s.LimitDelete(t.Context(), &store.LimitDeleteParams{Scope: store.FlowScope{Tenant: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.QueuePause(t.Context(), &store.QueuePauseParams{Scope: store.FlowScope{Queue: "default"}}); err != nil {
		t.Fatal(err)
	}
	if n := len(claim(t, s, now, 20)); n != 0 {
		t.Fatalf("claim right after a pause: %d jobs, want 0", n)
	}
	if err := s.QueueResume(t.Context(), &store.QueuePauseParams{Scope: store.FlowScope{Queue: "default"}}); err != nil {
		t.Fatal(err)
	}
	total += len(claim(t, s, now, 20))
	if err := s.QueuePause(t.Context(), &store.QueuePauseParams{Scope: store.FlowScope{Queue: "default", Tenant: "a"}}); err != nil {
		t.Fatal(err)
	}
	insertTenant(t, s, "a", 1)
	if n := len(claim(t, s, now, 20)); n != 0 {
		t.Fatalf("claim right after pausing tenant a in the queue: %d jobs, want 0", n)
	}
	if total != 14 {
		t.Fatalf("%d of 14 jobs claimed once the limit was deleted and the queue resumed", total)
	}
}

// Claims that found one tenant only are followed by enqueues of tenants
// before and after it in name order: the next claim visits them at once.
func testFairNewTenants(t *testing.T, s store.Store) {
	insertTenant(t, s, "m", 100)
	for range 2 {
		if got := byTenant(claim(t, s, at(time.Second), 10)); got["m"] != 10 {
			t.Fatalf("claim of the only tenant: %v", got)
		}
	}
	insertTenant(t, s, "a", 5)
	insertTenant(t, s, "z", 5)
	got := byTenant(claim(t, s, at(time.Second), 10))
	if got["a"] == 0 || got["z"] == 0 || got["a"]+got["m"]+got["z"] != 10 {
		t.Fatalf("claim after tenants a and z enqueued beside m: %v, want all three", got)
	}
}

// testFairEmptyClaimKeepsRotation: a claim that finds no claimable work
// visits no tenant, so the next claim still starts after the tenant where
// the last claim that visited one stopped; also when a weight came and
// went in between (a store may claim by other means while flow-control
// rows apply: PostgreSQL's one-statement claim once visited the lone
// tenant of an earlier claim here, and moved the rotation onto it).
func testFairEmptyClaimKeepsRotation(t *testing.T, s store.Store) {
	insertTenant(t, s, "t3", 1)
	if got := byTenant(claim(t, s, at(time.Second), 2)); got["t3"] != 1 {
		t.Fatalf("first claim: %v, want t3's job", got)
	}
	weight := store.Limit{FlowScope: store.FlowScope{Tenant: "t9"}, Weight: 2}
	putLimit(t, s, weight)
	insertTenant(t, s, "t2", 1)
	if got := byTenant(claim(t, s, at(time.Second), 2)); got["t2"] != 1 {
		t.Fatalf("claim under a weight: %v, want t2's job", got)
	}
	wantOK(t, "LimitDelete", s.LimitDelete(t.Context(), &store.LimitDeleteParams{Scope: weight.FlowScope}))
	for i := range 3 {
		if got := claim(t, s, at(time.Second), 2); len(got) != 0 {
			t.Fatalf("claim %d without work took %d jobs", i, len(got))
		}
	}
	insertTenant(t, s, "t1", 1)
	insertTenant(t, s, "t3", 1)
	if got := byTenant(claim(t, s, at(time.Second), 1)); got["t3"] != 1 {
		t.Fatalf("claim of one after claims without work: %v, want t3's job (the first tenant after t2, where the rotation stopped)", got)
	}
}

// testFairShareCutByLimit: claims of 4 among 3 tenants give each a share
// of 2, so the third visited tenant's share is cut to nothing by the
// claim's own limit; the next claim must start with it, not pass it (it
// starved while the first two had work).
func testFairShareCutByLimit(t *testing.T, s store.Store) {
	for _, tenant := range []string{"a", "b", "c"} {
		insertTenant(t, s, tenant, 40)
	}
	starts := map[string]int{}
	for range 6 {
		for tenant, n := range byTenant(claim(t, s, at(time.Second), 4)) {
			starts[tenant] += n
		}
	}
	for _, tenant := range []string{"a", "b", "c"} {
		if starts[tenant] < 6 {
			t.Fatalf("starts per tenant over 6 claims of 4: %v; %s got fewer than 6", starts, tenant)
		}
	}
}

// testFairDefaultConcurrencyProgress: a default concurrency of 1 per tenant,
// three tenants, claims of 1 and 2 while at most two of them run: every
// claim finds the tenant with room (a spent tenant visited first must not
// hold the cursor), and each tenant starts its share.
func testFairDefaultConcurrencyProgress(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: everyTenant, Concurrency: 1})
	for _, tenant := range []string{"a", "b", "c"} {
		insertTenant(t, s, tenant, 20)
	}
	var running []*idemtype.JobRow
	starts := map[string]int{}
	now := at(time.Second)
	for i := range 30 {
		for len(running) > 1 {
			finish1(t, s, completion(running[0], `"ok"`, now))
			running = running[1:]
		}
		got := claim(t, s, now, 1+i%2)
		if len(got) == 0 {
			t.Fatalf("claim %d: nothing claimed while a tenant had room; starts %v", i, starts)
		}
		for _, j := range got {
			starts[j.Tenant]++
		}
		running = append(running, got...)
	}
	for _, tenant := range []string{"a", "b", "c"} {
		if starts[tenant] < 8 {
			t.Fatalf("starts per tenant over 30 claims: %v; %s starved", starts, tenant)
		}
	}
}
