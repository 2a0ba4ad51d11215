package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Jobs waiting for their run_at (scheduled, retryable) are made available
// by each claim of their queue before it reads (migration 0031). These
// cases run due scheduled and retryable jobs through each shape of flow
// control with no promoter: every claim path of a store must promote
// before it reads, and before it tells whether a spent limit held work
// back.

// claimDueFlowCases are the cases of due jobs under flow control (also
// part of Run; RunClaimDueFlow runs them alone).
func claimDueFlowCases() []testCase {
	return append(dueFlowCases(false),
		testCase{"JobPromote/limit_across_queues_earliest_first", testPromoteLimitAcrossQueues},
		testCase{"JobClaim/due_fifo_partition_keeps_id_order", testClaimDueFIFO},
		testCase{"JobClaim/due_backlog_delays_another_tenant_by_batches", testClaimDueBacklogOtherTenant})
}

// dueFlowCases are claimDueFlowCases, only those whose claims are of one
// queue with a rate or concurrency limit when limitedOnly.
func dueFlowCases(limitedOnly bool) []testCase {
	out := []testCase{{"Race/cancel_delete_claims_promoter_over_due_jobs_concurrency_limit", func(t *testing.T, s store.Store) {
		testRaceCancelDueJobs(t, s, true)
	}}}
	if !limitedOnly {
		out = append(out, testCase{"Race/cancel_delete_claims_promoter_over_due_jobs", func(t *testing.T, s store.Store) {
			testRaceCancelDueJobs(t, s, false)
		}})
	}
	for _, sh := range dueFlowShapes {
		if limitedOnly && !sh.limited {
			continue
		}
		out = append(out, testCase{"JobClaim/due_jobs_without_promoter_" + sh.name, func(t *testing.T, s store.Store) {
			testClaimDueFlow(t, s, sh)
		}})
	}
	for _, c := range throttleWorkScopes {
		for _, conc := range []bool{false, true} {
			kind := "rate"
			if conc {
				kind = "concurrency"
			}
			for _, retry := range []bool{false, true} {
				what := "scheduled"
				if retry {
					what = "retryable"
				}
				out = append(out, testCase{"Limits/spent_" + kind + "_throttles_due_" + what + "_work_" + c.name, func(t *testing.T, s store.Store) {
					testThrottleDueWork(t, s, c.scope, conc, retry)
				}})
			}
		}
	}
	return out
}

// RunClaimDueFlow runs the cases of due jobs under flow control (also part
// of Run) whose claims are of one queue with a rate or concurrency limit,
// each on its own store from newStore: a backend with several limited
// claim paths runs them once per path.
func RunClaimDueFlow(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	runCases(t, dueFlowCases(true), newStore)
}

// dueFlowShape is one shape of flow control a claim of due jobs runs
// under: setup configures it (after the jobs exist), claim makes the
// claim's parameters at now.
type dueFlowShape struct {
	name string
	// queueB is the queue of tenant b's jobs (q unless the shape claims
	// two queues).
	queueB string
	setup  func(t *testing.T, s store.Store)
	// params adjusts the claim of queues q (and queueB).
	params func(p *store.JobClaimParams)
	// pause pauses q before the first claim and resumes it after.
	pause bool
	// limited: the claims are of one queue with a rate or concurrency
	// limit (RunClaimDueFlow).
	limited bool
}

var dueFlowShapes = []dueFlowShape{
	{name: "queue_concurrency_limit", limited: true, setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 50})},
	{name: "queue_rate_limit", limited: true, setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 50, Period: time.Hour})},
	{name: "tenant_rate_limit", limited: true, setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Tenant: "b", Queue: "q"}, Rate: 50, Period: time.Hour})},
	{name: "default_concurrency_limit", limited: true, setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "q"}, Concurrency: 50})},
	{name: "tenant_weights", setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Tenant: "a"}, Weight: 3})},
	{name: "paused_then_resumed", pause: true},
	{name: "two_queues", queueB: "r"},
	{name: "two_queues_rate_limit", queueB: "r", setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Queue: "r"}, Rate: 50, Period: time.Hour})},
	{name: "tenant_filter", params: func(p *store.JobClaimParams) { p.Tenant = "b" }},
	{name: "tenant_filter_rate_limit", limited: true, params: func(p *store.JobClaimParams) { p.Tenant = "b" },
		setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 50, Period: time.Hour})},
	{name: "kinds_filter", params: func(p *store.JobClaimParams) { p.Kinds = []string{"k", "r"} }},
	{name: "kinds_filter_concurrency_limit", limited: true, params: func(p *store.JobClaimParams) { p.Kinds = []string{"k", "r"} },
		setup: limitSetup(store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 50})},
}

func limitSetup(l store.Limit) func(t *testing.T, s store.Store) {
	return func(t *testing.T, s store.Store) { t.Helper(); putLimit(t, s, l) }
}

// testClaimDueFlow: tenant a has a due scheduled job and a due retryable
// one (and one scheduled for later), tenant b seven due scheduled jobs
// and one due retryable one; with no promoter, a claim of 8 under the
// shape's flow control takes 8 of them (every tenant's first-round share,
// then later rounds among those that filled theirs), the next claim the
// rest, and the job scheduled for later stays scheduled. A tenant-filtered
// claim takes its tenant's only. A paused queue's claim takes nothing and
// starts nothing.
func testClaimDueFlow(t *testing.T, s store.Store, sh dueFlowShape) {
	queueB := sh.queueB
	if queueB == "" {
		queueB = "q"
	}
	mk := func(tenant, queue, kind string, runAt time.Duration) *store.JobInsertParams {
		p := newJob(kind)
		p.Tenant, p.Queue, p.RunAt = tenant, queue, at(runAt)
		return p
	}
	ps := []*store.JobInsertParams{mk("a", "q", "k", time.Minute), mk("a", "q", "later", time.Hour)}
	for range 7 {
		ps = append(ps, mk("b", queueB, "k", time.Minute))
	}
	js := insertNew(t, s, at(0), ps...)
	later := js[1]
	due := []int64{js[0].ID}
	for _, j := range js[2:] {
		due = append(due, j.ID)
	}
	// One retryable job of each tenant, due at +1m: claimed and failed
	// before any flow control exists.
	for _, r := range insertNew(t, s, at(0), mk("a", "q", "r", 0), mk("b", queueB, "r", 0)) {
		c := claimJob(t, s, r, at(0))
		finish1(t, s, failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Minute), at(time.Second)))
		wantState(t, s, r.ID, idemtype.StateRetryable)
		due = append(due, r.ID)
	}
	if sh.setup != nil {
		sh.setup(t, s)
	}
	now := at(2 * time.Minute)
	queues := []string{"q"}
	if queueB != "q" {
		queues = append(queues, queueB)
	}
	params := func(limit int) *store.JobClaimParams {
		p := &store.JobClaimParams{Queues: queues, WorkerID: "w1", Limit: limit, LeaseUntil: now.Add(lease), Now: now}
		if sh.params != nil {
			sh.params(p)
		}
		return p
	}
	if sh.pause {
		pause := &store.QueuePauseParams{Scope: store.FlowScope{Queue: "q"}}
		wantOK(t, "QueuePause", s.QueuePause(t.Context(), pause))
		if got := claimWith(t, s, params(8)); len(got) != 0 {
			t.Fatalf("claim of the paused queue took %v", ids(got))
		}
		for _, id := range due {
			j := mustGet(t, s, id)
			if j.State == idemtype.StateRunning || j.StartedAt != nil && j.StartedAt.After(at(time.Second)) {
				t.Errorf("job %d of the paused queue: state %s, started %v: a claim of a paused queue started it", id, j.State, j.StartedAt)
			}
		}
		wantOK(t, "QueueResume", s.QueueResume(t.Context(), pause))
	}
	want := due
	if p := params(1); p.Tenant != "" {
		want = nil
		for _, id := range due {
			if mustGet(t, s, id).Tenant == p.Tenant {
				want = append(want, id)
			}
		}
	}
	first := claimWith(t, s, params(8))
	if len(first) != min(8, len(want)) {
		t.Errorf("first claim of 8 took %d jobs %v of the %d due ones", len(first), ids(first), len(want))
	}
	got := ids(first)
	for range 3 {
		more := claimWith(t, s, params(8))
		if len(more) == 0 {
			break
		}
		got = append(got, ids(more)...)
	}
	wantIDSet(t, "due jobs claimed without a promoter", got, want)
	for _, j := range first {
		if j.State != idemtype.StateRunning || j.Attempt == 0 {
			t.Errorf("claimed job %d: state %s, attempt %d", j.ID, j.State, j.Attempt)
		}
	}
	if slices.Contains(got, later.ID) {
		t.Errorf("job %d claimed before its RunAt", later.ID)
	}
	wantState(t, s, later.ID, idemtype.StateScheduled)
}

// testThrottleDueWork is testThrottleOnlyWithWork's last part with the
// waiting job due but not yet made available (scheduled, or retryable,
// with no promoter): a limit of scope spent (a rate of 1 an hour, or a
// concurrency of 1 held by a running job) holds it back, so each poll is
// throttled and counts one on the limit.
func testThrottleDueWork(t *testing.T, s store.Store, scope store.FlowScope, conc, retry bool) {
	job := func(kind string, runAt time.Time) *store.JobInsertParams {
		p := newJob(kind)
		p.Tenant, p.Queue, p.RunAt = "a", "q", runAt
		return p
	}
	var waiting *idemtype.JobRow
	if retry {
		// Failed before the limit exists, due at +1m.
		w := insert1(t, s, at(0), job("k", at(0)))
		c := claimJob(t, s, w, at(0))
		finish1(t, s, failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Minute), at(time.Second)))
		waiting = w
	}
	l := store.Limit{FlowScope: scope, Rate: 1, Period: time.Hour}
	if conc {
		l = store.Limit{FlowScope: scope, Concurrency: 1}
	}
	putLimit(t, s, l)
	poll := func(now time.Time) ([]*idemtype.JobRow, store.ClaimReport) {
		t.Helper()
		var rep store.ClaimReport
		jobs := claimWith(t, s, &store.JobClaimParams{Queues: []string{"q"}, Kinds: []string{"k"},
			WorkerID: "w1", Limit: 1, LeaseUntil: now.Add(lease), Now: now, Report: &rep})
		return jobs, rep
	}
	throttled := func(now time.Time) int64 { t.Helper(); return throttledOf(t, s, scope, now) }
	// Spend the limit with tenant a's one available job.
	insertNew(t, s, at(0), job("k", at(0)))
	if jobs, _ := poll(at(time.Second)); len(jobs) != 1 {
		t.Fatalf("first claim took %d jobs, want a's available one", len(jobs))
	}
	if !retry {
		waiting = insert1(t, s, at(0), job("k", at(time.Minute)))
	}
	wantState(t, s, waiting.ID, map[bool]idemtype.JobState{false: idemtype.StateScheduled, true: idemtype.StateRetryable}[retry])
	for i := range 2 {
		now := at(2*time.Minute + time.Duration(i)*time.Second)
		jobs, rep := poll(now)
		wantRefill := time.Time{}
		if !conc {
			wantRefill = l.WindowAt(now).Add(time.Hour)
		}
		if len(jobs) != 0 || !rep.Throttled || !rep.NextRefill.Equal(wantRefill) {
			t.Fatalf("poll %d with a's due job %d waiting (%s) took %d jobs, report %+v; want nothing, throttled, refill %v",
				i, waiting.ID, mustGet(t, s, waiting.ID).State, len(jobs), rep, wantRefill)
		}
		if n := throttled(now); n != int64(i+1) {
			t.Fatalf("after %d throttled polls the limit counts %d throttled claims", i+1, n)
		}
	}
	if j := mustGet(t, s, waiting.ID); j.State == idemtype.StateRunning {
		t.Fatalf("job %d held back by the spent limit runs", j.ID)
	}
}
