package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func claimCases() []testCase {
	return []testCase{
		{"JobClaim/order_priority_then_run_at_then_id", testClaimOrder},
		{"JobClaim/one_claim_returns_jobs_in_order", testClaimOrderInOneClaim},
		{"JobClaim/limit_takes_the_first_in_order", testClaimOrderWithinLimit},
		{"JobClaim/future_run_at_not_claimed", testClaimFuture},
		{"JobClaim/queues_and_kinds_filters", testClaimFilters},
		{"JobClaim/tenant_filter", testClaimTenant},
		{"JobClaim/limit", testClaimLimit},
		{"JobClaim/limit_0_claims_nothing", testClaimLimitZero},
		{"JobClaim/sets_lease_fields_and_attempt_record", testClaimFields},
		{"JobClaim/due_scheduled_and_retryable_claimable", testClaimDue},
		{"JobClaim/due_scheduled_competes_by_priority", testClaimDueByPriority},
		{"JobClaim/due_beyond_one_promote_batch", testClaimDueBeyondOneBatch},
		{"JobClaim/not_claimable_states", testClaimNotClaimable},
		{"JobClaim/partition_head_only", testPartitionHead},
		{"JobClaim/partition_retryable_head_blocks", testPartitionRetryableBlocks},
		{"JobClaim/partition_dead_or_cancelled_head_releases", testPartitionDeadReleases},
		{"JobClaim/partition_scheduled_or_pending_head_blocks", testPartitionWaitingHeadBlocks},
		{"JobClaim/partitions_in_other_queues_independent", testPartitionQueues},
		{"JobClaim/fifo_head_blocks_its_partition", testFIFOHead},
		{"JobClaim/partitions_scoped_by_tenant", testPartitionTenants},
	}
}

func testClaimOrder(t *testing.T, s store.Store) {
	mk := func(kind string, prio int, runAt time.Duration) *store.JobInsertParams {
		p := newJob(kind)
		p.Priority = prio
		p.RunAt = at(runAt)
		return p
	}
	js := insertNew(t, s, at(0),
		mk("a", 0, -3*time.Minute),
		mk("b", 5, -1*time.Minute),
		mk("c", 5, -2*time.Minute),
		mk("d", 5, -2*time.Minute),
		mk("e", -1, -10*time.Minute),
		mk("f", 0, -3*time.Minute),
	)
	byKind := map[string]int64{}
	for _, j := range js {
		byKind[j.Kind] = j.ID
	}
	var got []int64
	for range 7 {
		got = append(got, ids(claim(t, s, at(0), 1))...)
	}
	wantIDs(t, "claim order", got, []int64{byKind["c"], byKind["d"], byKind["b"], byKind["a"], byKind["f"], byKind["e"]})
}

// testClaimOrderInOneClaim: the jobs of one claim come back in claim order
// too (priority, then run time, then id), whatever order the store's
// statement produced them in: the runtime starts them in that order.
func testClaimOrderInOneClaim(t *testing.T, s store.Store) {
	mk := func(kind string, prio int, runAt time.Duration) *store.JobInsertParams {
		p := newJob(kind)
		p.Priority = prio
		p.RunAt = at(runAt)
		return p
	}
	js := insertNew(t, s, at(0),
		mk("e", -1, -10*time.Minute),
		mk("a", 0, -3*time.Minute),
		mk("b", 5, -1*time.Minute),
		mk("f", 0, -3*time.Minute),
		mk("c", 5, -2*time.Minute),
		mk("d", 5, -2*time.Minute),
	)
	byKind := map[string]int64{}
	for _, j := range js {
		byKind[j.Kind] = j.ID
	}
	got := ids(claim(t, s, at(0), 10))
	wantIDs(t, "order within one claim", got, []int64{byKind["c"], byKind["d"], byKind["b"], byKind["a"], byKind["f"], byKind["e"]})
}

func testClaimOrderWithinLimit(t *testing.T, s store.Store) {
	var ps []*store.JobInsertParams
	for i := range 6 {
		p := newJob("k")
		p.Priority = i % 2
		ps = append(ps, p)
	}
	js := insertNew(t, s, at(0), ps...)
	wantIDSet(t, "claim of 3 by priority then id", ids(claim(t, s, at(0), 3)), []int64{js[1].ID, js[3].ID, js[5].ID})
	wantIDSet(t, "next claim of 2", ids(claim(t, s, at(0), 2)), []int64{js[0].ID, js[2].ID})
}

func testClaimFuture(t *testing.T, s store.Store) {
	p := newJob("k")
	p.RunAt = at(time.Minute)
	j := insert1(t, s, at(0), p)
	if got := claim(t, s, at(59*time.Second), 10); len(got) != 0 {
		t.Errorf("claimed %v before RunAt", ids(got))
	}
	got := claim(t, s, at(time.Minute), 10)
	wantIDs(t, "claim at RunAt", ids(got), []int64{j.ID})
}

func testClaimFilters(t *testing.T, s store.Store) {
	mk := func(q, k string) *store.JobInsertParams {
		p := newJob(k)
		p.Queue = q
		return p
	}
	js := insertNew(t, s, at(0), mk("q1", "k1"), mk("q1", "k2"), mk("q2", "k1"), mk("q3", "k1"))
	got := claimWith(t, s, &store.JobClaimParams{Queues: []string{"q1"}, Kinds: []string{"k2"}, WorkerID: "w",
		Limit: 10, LeaseUntil: at(lease), Now: at(0)})
	wantIDs(t, "queue q1 kind k2", ids(got), []int64{js[1].ID})
	got = claimWith(t, s, &store.JobClaimParams{Queues: []string{"q1", "q2"}, Kinds: []string{"k1", "k3"}, WorkerID: "w",
		Limit: 10, LeaseUntil: at(lease), Now: at(0)})
	wantIDSet(t, "queues q1,q2 kinds k1,k3", ids(got), []int64{js[0].ID, js[2].ID})
	if got := claim(t, s, at(0), 10, "q9"); len(got) != 0 {
		t.Errorf("claim in an empty queue returned %v", ids(got))
	}
	// An empty kind list (not nil, which is any kind) names no kind.
	got = claimWith(t, s, &store.JobClaimParams{Queues: []string{"q3"}, Kinds: []string{}, WorkerID: "w",
		Limit: 10, LeaseUntil: at(lease), Now: at(0)})
	wantIDs(t, "queue q3 with an empty kind list", ids(got), nil)
	wantState(t, s, js[3].ID, idemtype.StateAvailable)
	wantIDs(t, "queue q3", ids(claim(t, s, at(0), 10, "q3")), []int64{js[3].ID})
}

func testClaimTenant(t *testing.T, s store.Store) {
	a, b := newJob("k"), newJob("k")
	a.Tenant, b.Tenant = "a", "b"
	js := insertNew(t, s, at(0), a, b)
	got := claimWith(t, s, &store.JobClaimParams{Tenant: "b", Queues: []string{"default"}, WorkerID: "w",
		Limit: 10, LeaseUntil: at(lease), Now: at(0)})
	wantIDs(t, "tenant b", ids(got), []int64{js[1].ID})
	wantIDs(t, "any tenant", ids(claim(t, s, at(0), 10)), []int64{js[0].ID})
}

func testClaimLimit(t *testing.T, s store.Store) {
	var ps []*store.JobInsertParams
	for range 5 {
		ps = append(ps, newJob("k"))
	}
	js := insertNew(t, s, at(0), ps...)
	var got []int64
	for _, want := range []int{2, 2, 1, 0} {
		c := claim(t, s, at(0), 2)
		if len(c) != want {
			t.Errorf("claim with limit 2 returned %d jobs, want %d", len(c), want)
		}
		got = append(got, ids(c)...)
	}
	wantIDSet(t, "claimed", got, ids(js))
}

func testClaimFields(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), newJob("k"), newJob("k"))
	now := at(time.Second)
	got := claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "worker-a",
		Limit: 2, LeaseUntil: at(time.Hour), Now: now})
	if len(got) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(got))
	}
	if got[0].LeaseToken == got[1].LeaseToken {
		t.Errorf("two claims share the lease token %q", got[0].LeaseToken)
	}
	for _, c := range got {
		for _, j := range []*idemtype.JobRow{c, mustGet(t, s, c.ID)} {
			if j.State != idemtype.StateRunning || j.Attempt != 1 || j.WorkerID != "worker-a" || j.LeaseToken == "" {
				t.Errorf("job %d: state %s attempt %d worker %q token %q; want running, 1, worker-a, a token",
					j.ID, j.State, j.Attempt, j.WorkerID, j.LeaseToken)
			}
			if j.LeaseToken != c.LeaseToken {
				t.Errorf("job %d: stored token %q, claim returned %q", j.ID, j.LeaseToken, c.LeaseToken)
			}
			wantTimeP(t, "StartedAt", j.StartedAt, now)
			wantTimeP(t, "LeaseExpiresAt", j.LeaseExpiresAt, at(time.Hour))
			wantNil(t, "FinishedAt", j.FinishedAt)
			wantTime(t, "RunAt", j.RunAt, base)
			wantTime(t, "CreatedAt", j.CreatedAt, at(0))
		}
		as := attempts(t, s, c.ID)
		if len(as) != 1 {
			t.Fatalf("job %d: %d attempts, want 1", c.ID, len(as))
		}
		a := as[0]
		if a.JobID != c.ID || a.Attempt != 1 || a.Outcome != idemtype.OutcomeRunning || a.WorkerID != "worker-a" {
			t.Errorf("attempt: %+v; want job %d attempt 1 running worker-a", a, c.ID)
		}
		wantTime(t, "attempt StartedAt", a.StartedAt, now)
		wantNil(t, "attempt FinishedAt", a.FinishedAt)
	}
	wantIDSet(t, "claimed", ids(got), ids(js))
	// A second claim with the same token space gets nothing.
	if again := claim(t, s, now, 10); len(again) != 0 {
		t.Errorf("running jobs claimed again: %v", ids(again))
	}
}

func testClaimDue(t *testing.T, s store.Store) {
	r := insert1(t, s, at(0), newJob("retry"))
	c := claimJob(t, s, r, at(0))
	finish1(t, s, failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(time.Minute), at(time.Second)))
	sp := newJob("sched")
	sp.RunAt = at(2 * time.Minute)
	sched := insert1(t, s, at(0), sp)
	wantState(t, s, sched.ID, idemtype.StateScheduled)

	if got := claim(t, s, at(30*time.Second), 10); len(got) != 0 {
		t.Errorf("claimed %v before their RunAt", ids(got))
	}
	got := claim(t, s, at(time.Minute), 10)
	wantIDs(t, "retryable at RunAt", ids(got), []int64{r.ID})
	if len(got) == 1 && got[0].Attempt != 2 {
		t.Errorf("retried job attempt %d, want 2", got[0].Attempt)
	}
	got = claim(t, s, at(2*time.Minute), 10)
	wantIDs(t, "scheduled at RunAt", ids(got), []int64{sched.ID})
	as := attempts(t, s, r.ID)
	if len(as) != 2 || as[0].Attempt != 1 || as[1].Attempt != 2 || as[0].Outcome != idemtype.OutcomeFailed || as[1].Outcome != idemtype.OutcomeRunning {
		t.Errorf("attempts of the retried job: %v", fmtAttempts(as))
	}
}

func testClaimNotClaimable(t *testing.T, s store.Store) {
	dep := insert1(t, s, at(0), newJob("dep"))
	pp := newJob("pending")
	pp.DependsOn = []int64{dep.ID}
	pending := insert1(t, s, at(0), pp)
	done := completeJob(t, s, insert1(t, s, at(0), newJob("done")), at(0), `1`)
	dead := killJob(t, s, insert1(t, s, at(0), newJob("dead")), at(0))
	cancelled := cancelJob(t, s, insert1(t, s, at(0), newJob("cancelled")), at(0))
	claimJob(t, s, dep, at(0)) // running now
	if got := claim(t, s, at(time.Hour), 10); len(got) != 0 {
		t.Errorf("claimed %v among pending, running and finished jobs", ids(got))
	}
	for _, j := range []*idemtype.JobRow{pending, done, dead, cancelled} {
		if got := mustGet(t, s, j.ID); got.Attempt > 1 || (j.ID == pending.ID && got.Attempt != 0) {
			t.Errorf("job %d (%s): attempt %d", j.ID, j.Kind, got.Attempt)
		}
	}
}

// partitioned returns params of a job in queue q and partition part.
func partitioned(kind, q, part string) *store.JobInsertParams {
	p := newJob(kind)
	p.Queue = q
	p.PartitionKey = part
	return p
}

func testPartitionHead(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0),
		partitioned("a1", "q", "A"), partitioned("b1", "q", "B"), partitioned("a2", "q", "A"),
		partitioned("n1", "q", ""), partitioned("a3", "q", "A"), partitioned("n2", "q", ""))
	a1, b1, a2, n1, a3, n2 := js[0], js[1], js[2], js[3], js[4], js[5]
	got := claim(t, s, at(0), 10, "q")
	wantIDSet(t, "first claim", ids(got), []int64{a1.ID, b1.ID, n1.ID, n2.ID})
	if again := claim(t, s, at(0), 10, "q"); len(again) != 0 {
		t.Errorf("claimed %v while the heads run", ids(again))
	}
	for _, c := range got {
		if c.ID == a1.ID {
			finish1(t, s, completion(c, `1`, at(time.Second)))
		}
	}
	next := claim(t, s, at(2*time.Second), 10, "q")
	wantIDs(t, "after the head completed", ids(next), []int64{a2.ID})
	finish1(t, s, completion(next[0], `1`, at(3*time.Second)))
	wantIDs(t, "third of the partition", ids(claim(t, s, at(4*time.Second), 10, "q")), []int64{a3.ID})
}

func testPartitionRetryableBlocks(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claim(t, s, at(0), 10, "q")
	wantIDs(t, "head", ids(c), []int64{js[0].ID})
	finish1(t, s, failure(c[0], idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(time.Hour), at(time.Second)))
	if got := claim(t, s, at(time.Minute), 10, "q"); len(got) != 0 {
		t.Errorf("claimed %v while the head is retryable", ids(got))
	}
	wantIDs(t, "retried head", ids(claim(t, s, at(time.Hour), 10, "q")), []int64{js[0].ID})
}

func testPartitionDeadReleases(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"), partitioned("a3", "q", "A"))
	c := claim(t, s, at(0), 10, "q")
	wantIDs(t, "head", ids(c), []int64{js[0].ID})
	finish1(t, s, failure(c[0], idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, at(time.Second)))
	c = claim(t, s, at(2*time.Second), 10, "q")
	wantIDs(t, "after a dead head", ids(c), []int64{js[1].ID})
	cancelJob(t, s, c[0], at(3*time.Second))
	// Its handler returned: the refused finish acknowledges the cancel
	// (until then the cancelled head holds its partition: cancel_hold.go).
	finishAll(t, s, completion(c[0], `1`, at(3*time.Second)))
	wantIDs(t, "after a cancelled head", ids(claim(t, s, at(4*time.Second), 10, "q")), []int64{js[2].ID})
}

func testPartitionWaitingHeadBlocks(t *testing.T, s store.Store) {
	dep := insert1(t, s, at(0), newJob("dep"))
	s1 := partitioned("s1", "q", "S")
	s1.RunAt = at(time.Hour)
	p1 := partitioned("p1", "q", "P")
	p1.DependsOn = []int64{dep.ID}
	js := insertNew(t, s, at(0), s1, partitioned("s2", "q", "S"), p1, partitioned("p2", "q", "P"))
	if got := claim(t, s, at(time.Minute), 10, "q"); len(got) != 0 {
		t.Errorf("claimed %v behind a scheduled or pending head", ids(got))
	}
	wantIDs(t, "scheduled head at its RunAt", ids(claim(t, s, at(time.Hour), 10, "q")), []int64{js[0].ID})
}

func testPartitionQueues(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q1", "A"), partitioned("a2", "q1", "A"), partitioned("c1", "q2", "A"))
	wantIDs(t, "q1", ids(claim(t, s, at(0), 10, "q1")), []int64{js[0].ID})
	wantIDs(t, "q2 while q1's partition A runs", ids(claim(t, s, at(0), 10, "q2")), []int64{js[2].ID})
}

func testFIFOHead(t *testing.T, s store.Store) {
	a, b := newJob("p"), newJob("p")
	a.PartitionKey, b.PartitionKey = "entity-1", "entity-1"
	c := newJob("p")
	c.PartitionKey = "entity-2"
	res := insertAll(t, s, base, a, b, c)
	got := claim(t, s, base, 10)
	if len(got) != 2 || got[0].ID != res[0].Job.ID || got[1].ID != res[2].Job.ID {
		t.Fatalf("first claim: %v", ids(got))
	}
	// A retrying head blocks its partition.
	errs, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{{ID: got[0].ID,
		LeaseToken: got[0].LeaseToken, State: idemtype.StateRetryable, Outcome: idemtype.OutcomeFailed,
		Error: "x", RunAt: base.Add(time.Hour), FinishedAt: base}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if got := claim(t, s, base, 10); len(got) != 0 {
		t.Fatalf("claimed behind a retrying head: %v", ids(got))
	}
	// A dead head releases it.
	got = claim(t, s, base.Add(time.Hour), 10)
	if len(got) != 1 || got[0].ID != res[0].Job.ID || got[0].Attempt != 2 {
		t.Fatalf("retry claim: %v", ids(got))
	}
	finishAs(t, s, got[0], idemtype.StateDead, base.Add(time.Hour))
	got = claim(t, s, base.Add(time.Hour), 10)
	if len(got) != 1 || got[0].ID != res[1].Job.ID {
		t.Fatalf("after dead head: %v", ids(got))
	}
}

func testPartitionTenants(t *testing.T, s store.Store) {
	mk := func(kind, tenant string) *store.JobInsertParams {
		p := partitioned(kind, "q", "P")
		p.Tenant = tenant
		return p
	}
	js := insertNew(t, s, at(0), mk("a1", "a"), mk("b1", "b"), mk("a2", "a"), mk("b2", "b"))
	a1, b1, a2, b2 := js[0], js[1], js[2], js[3]
	got := claim(t, s, at(0), 10, "q")
	wantIDSet(t, "heads of the two tenants' partitions", ids(got), []int64{a1.ID, b1.ID})
	for _, c := range got {
		if c.ID == b1.ID {
			finish1(t, s, completion(c, `1`, at(time.Second)))
		}
	}
	wantIDs(t, "after tenant b's head completed", ids(claim(t, s, at(2*time.Second), 10, "q")), []int64{b2.ID})
	if again := claim(t, s, at(2*time.Second), 10, "q"); len(again) != 0 {
		t.Errorf("claimed %v while tenant a's head runs", ids(again))
	}
	_ = a2
}
