package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func queryCases() []testCase {
	return []testCase{
		{"JobList/filters", testListFilters},
		{"JobList/pagination_newest_first", testListPagination},
		{"JobDelete/only_in_given_state", testJobDelete},
		{"AttemptList/order_and_tenant", testAttemptList},
		{"QueueStats/counts", testQueueStats},
		{"JobList/page_is_at_most_MaxListLimit", testListLimit},
		{"JobDurations/per_queue_in_one_call", testJobDurations},
	}
}

// list returns one page.
func list(t *testing.T, s store.Store, f store.JobFilter, limit int, cursor int64) ([]int64, int64) {
	t.Helper()
	jobs, next, err := s.JobList(t.Context(), &store.JobListParams{Filter: f, Limit: limit, Cursor: cursor})
	if err != nil {
		t.Fatalf("JobList(%+v): %v", f, err)
	}
	return ids(jobs), next
}

func testListFilters(t *testing.T, s store.Store) {
	mk := func(tenant, queue, kind, part string) *store.JobInsertParams {
		p := newJob(kind)
		p.Tenant, p.Queue, p.PartitionKey = tenant, queue, part
		return p
	}
	// Created at at(0), at(1h), at(2h).
	j0 := insertNew(t, s, at(0), mk("a", "q1", "k1", "p1"), mk("a", "q2", "k2", ""))
	kp := keyed("k1", "K", "fp")
	kp.Tenant, kp.Queue = "a", "q1"
	j1 := insertNew(t, s, at(time.Hour), kp, mk("b", "q1", "k1", "p1"))
	j2 := insertNew(t, s, at(2*time.Hour), mk("a", "q1", "k2", "p2"), mk("a", "q1", "k1", "p1"))
	killJob(t, s, j0[1], at(3*time.Hour))          // finished at 3h+1s
	completeJob(t, s, j2[0], at(3*time.Hour), `1`) // finished at 3h+1s
	a0, a1, ak, b, a2, a3 := j0[0].ID, j0[1].ID, j1[0].ID, j1[1].ID, j2[0].ID, j2[1].ID

	desc := func(in ...int64) []int64 {
		out := slices.Clone(in)
		slices.Sort(out)
		slices.Reverse(out)
		return out
	}
	cases := []struct {
		name string
		f    store.JobFilter
		want []int64
	}{
		{"all tenants", store.JobFilter{}, desc(a0, a1, ak, b, a2, a3)},
		{"tenant a", store.JobFilter{Tenant: "a"}, desc(a0, a1, ak, a2, a3)},
		{"tenant b", store.JobFilter{Tenant: "b"}, desc(b)},
		{"unknown tenant", store.JobFilter{Tenant: "zzz"}, nil},
		{"state dead", store.JobFilter{States: []idemtype.JobState{idemtype.StateDead}}, desc(a1)},
		{"states dead+completed", store.JobFilter{States: []idemtype.JobState{idemtype.StateDead, idemtype.StateCompleted}}, desc(a1, a2)},
		{"state available tenant a", store.JobFilter{Tenant: "a", States: []idemtype.JobState{idemtype.StateAvailable}}, desc(a0, ak, a3)},
		{"queue q2", store.JobFilter{Queue: "q2"}, desc(a1)},
		{"kind k1", store.JobFilter{Kind: "k1"}, desc(a0, ak, b, a3)},
		{"kind k1 tenant a queue q1", store.JobFilter{Tenant: "a", Queue: "q1", Kind: "k1"}, desc(a0, ak, a3)},
		{"partition p1", store.JobFilter{PartitionKey: "p1"}, desc(a0, b, a3)},
		{"partition p1 tenant a", store.JobFilter{Tenant: "a", PartitionKey: "p1"}, desc(a0, a3)},
		{"idempotency key", store.JobFilter{IdempotencyKey: "K"}, desc(ak)},
		{"idempotency key other tenant", store.JobFilter{Tenant: "b", IdempotencyKey: "K"}, nil},
		{"since 1h", store.JobFilter{Since: at(time.Hour)}, desc(ak, b, a2, a3)},
		{"until 1h", store.JobFilter{Until: at(time.Hour)}, desc(a0, a1)},
		{"since 1h until 2h", store.JobFilter{Since: at(time.Hour), Until: at(2 * time.Hour)}, desc(ak, b)},
		{"since 1h until 2h tenant a", store.JobFilter{Tenant: "a", Since: at(time.Hour), Until: at(2 * time.Hour)}, desc(ak)},
		// FinishedSince bounds finished_at: unfinished jobs never match, a
		// job created long before finishing does.
		{"finished since 0", store.JobFilter{FinishedSince: at(0)}, desc(a1, a2)},
		{"finished since 3h+1s", store.JobFilter{FinishedSince: at(3*time.Hour + time.Second)}, desc(a1, a2)},
		{"finished since 3h+2s", store.JobFilter{FinishedSince: at(3*time.Hour + 2*time.Second)}, nil},
		{"finished since 2h, created before 1h", store.JobFilter{FinishedSince: at(2 * time.Hour), Until: at(time.Hour)}, desc(a1)},
		{"finished since 1h dead", store.JobFilter{FinishedSince: at(time.Hour), States: []idemtype.JobState{idemtype.StateDead}}, desc(a1)},
	}
	for _, c := range cases {
		got, next := list(t, s, c.f, 500, 0)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if next != 0 {
			t.Errorf("%s: next %d on the only page", c.name, next)
		}
	}
	// Rows are complete.
	jobs, _, err := s.JobList(t.Context(), &store.JobListParams{Filter: store.JobFilter{IdempotencyKey: "K"}, Limit: 10})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("JobList: %v %v", jobs, err)
	}
	if j := jobs[0]; j.Tenant != "a" || j.Queue != "q1" || j.Kind != "k1" || j.IdempotencyKey != "K" || j.State != idemtype.StateAvailable {
		t.Errorf("listed row: %+v", j)
	} else {
		wantTime(t, "listed CreatedAt", j.CreatedAt, at(time.Hour))
	}
}

func testListPagination(t *testing.T, s store.Store) {
	for _, n := range []int{5, 4} {
		tenant := "t" + itoa(int64(n))
		var ps []*store.JobInsertParams
		for range n {
			p := newJob("k")
			p.Tenant = tenant
			ps = append(ps, p)
		}
		js := insertNew(t, s, at(0), ps...)
		var all []int64
		cursor, pages := int64(0), 0
		for {
			got, next := list(t, s, store.JobFilter{Tenant: tenant}, 2, cursor)
			pages++
			if len(got) > 2 {
				t.Fatalf("page of %d with limit 2", len(got))
			}
			all = append(all, got...)
			if next == 0 {
				break
			}
			if pages > n {
				t.Fatalf("pagination does not end")
			}
			cursor = next
		}
		want := ids(js)
		slices.Reverse(want)
		wantIDs(t, tenant+" pages", all, want)
		if wantPages := (n + 1) / 2; pages != wantPages {
			t.Errorf("%d jobs by 2: %d pages, want %d (next must be 0 on the last page)", n, pages, wantPages)
		}
	}
}

func testJobDelete(t *testing.T, s store.Store) {
	p := newJob("dead")
	p.Tenant = "a"
	dead := killJob(t, s, insert1(t, s, at(0), p), at(0))
	ctx := t.Context()
	wantErr(t, "delete in the wrong state", s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "a", ID: dead.ID, State: idemtype.StateCompleted}), idemtype.ErrNotFound)
	wantErr(t, "delete in another tenant", s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "b", ID: dead.ID, State: idemtype.StateDead}), idemtype.ErrNotFound)
	wantErr(t, "delete of an unknown job", s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "a", ID: dead.ID + 1000, State: idemtype.StateDead}), idemtype.ErrNotFound)
	wantState(t, s, dead.ID, idemtype.StateDead)
	wantOK(t, "delete", s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "a", ID: dead.ID, State: idemtype.StateDead}))
	_, err := s.JobGet(ctx, &store.JobGetParams{Tenant: "", ID: dead.ID})
	wantErr(t, "get after delete", err, idemtype.ErrNotFound)
	_, err = s.AttemptList(ctx, &store.AttemptListParams{Tenant: "", JobID: dead.ID})
	wantErr(t, "attempts after delete", err, idemtype.ErrNotFound)
	wantErr(t, "second delete", s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "a", ID: dead.ID, State: idemtype.StateDead}), idemtype.ErrNotFound)
	// Tenant "" deletes in any tenant.
	other := killJob(t, s, insert1(t, s, at(0), newJob("other")), at(0))
	wantOK(t, "delete with tenant \"\"", s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "", ID: other.ID, State: idemtype.StateDead}))
}

func testAttemptList(t *testing.T, s store.Store) {
	p := newJob("k")
	p.Tenant = "a"
	j := insert1(t, s, at(0), p)
	for i := range 2 {
		now := at(time.Duration(i) * time.Minute)
		c := claimJob(t, s, j, now)
		finish1(t, s, failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "err"+itoa(int64(i+1)), now.Add(time.Minute), now.Add(time.Second)))
	}
	c := claimJob(t, s, j, at(2*time.Minute))
	finish1(t, s, completion(c, `1`, at(2*time.Minute+time.Second)))
	as, err := s.AttemptList(t.Context(), &store.AttemptListParams{Tenant: "a", JobID: j.ID})
	if err != nil {
		t.Fatalf("AttemptList: %v", err)
	}
	if len(as) != 3 {
		t.Fatalf("%d attempts, want 3", len(as))
	}
	wantOutcome := []idemtype.Outcome{idemtype.OutcomeFailed, idemtype.OutcomeFailed, idemtype.OutcomeCompleted}
	wantErrs := []string{"err1", "err2", ""}
	for i, a := range as {
		if a.Attempt != i+1 || a.JobID != j.ID || a.Outcome != wantOutcome[i] || a.Error != wantErrs[i] || a.WorkerID != "w1" {
			t.Errorf("attempt %d: %+v", i, a)
		}
		wantTime(t, "StartedAt", a.StartedAt, at(time.Duration(i)*time.Minute))
		wantTimeP(t, "FinishedAt", a.FinishedAt, at(time.Duration(i)*time.Minute+time.Second))
	}
	_, err = s.AttemptList(t.Context(), &store.AttemptListParams{Tenant: "b", JobID: j.ID})
	wantErr(t, "AttemptList in another tenant", err, idemtype.ErrNotFound)
	_, err = s.AttemptList(t.Context(), &store.AttemptListParams{Tenant: "a", JobID: j.ID + 1000})
	wantErr(t, "AttemptList of an unknown job", err, idemtype.ErrNotFound)
	fresh := insert1(t, s, at(0), newJob("fresh"))
	if as, err := s.AttemptList(t.Context(), &store.AttemptListParams{Tenant: "default", JobID: fresh.ID}); err != nil || len(as) != 0 {
		t.Errorf("AttemptList of an unclaimed job: %v %v, want none", as, err)
	}
}

func testQueueStats(t *testing.T, s store.Store) {
	mk := func(tenant, queue, kind string, runAt time.Duration) *idemtype.JobRow {
		p := newJob(kind)
		p.Tenant, p.Queue, p.RunAt = tenant, queue, at(runAt)
		return insert1(t, s, at(0), p)
	}
	mk("a", "q1", "avail1", -2*time.Minute)
	mk("a", "q1", "avail2", -time.Minute)
	mk("a", "q1", "sched", time.Hour)
	completeJob(t, s, mk("a", "q1", "done", 0), at(10*time.Second), `1`)
	killJob(t, s, mk("a", "q1", "dead", 0), at(10*time.Second))
	r := claimJob(t, s, mk("a", "q1", "retry", 0), at(10*time.Second))
	// The last claim before the retry is written: a claim makes the due
	// jobs of its queue available first (the retry is due at -5m).
	claimJob(t, s, mk("a", "q1", "run", 0), at(10*time.Second))
	finish1(t, s, failure(r, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(-5*time.Minute), at(11*time.Second)))
	mk("b", "q1", "avail_b", -time.Hour)
	mk("a", "q2", "avail_q2", 0)

	now := at(30 * time.Second)
	stats, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Tenant: "a", Now: now})
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	want := map[idemtype.JobState]int64{idemtype.StateAvailable: 2, idemtype.StateScheduled: 1, idemtype.StateCompleted: 1,
		idemtype.StateDead: 1, idemtype.StateRetryable: 1, idemtype.StateRunning: 1, idemtype.StatePending: 0, idemtype.StateCancelled: 0}
	for st, n := range want {
		if got := count(stats, "q1", st); got != n {
			t.Errorf("tenant a q1 %s = %d, want %d", st, got, n)
		}
	}
	if got := count(stats, "q2", idemtype.StateAvailable); got != 1 {
		t.Errorf("tenant a q2 available = %d, want 1", got)
	}
	q1 := queueStat(stats, "q1")
	if q1 == nil {
		t.Fatalf("no stats for q1")
	}
	// Oldest claimable: the retryable job's RunAt at(-5m).
	wantTimeP(t, "q1 OldestAvailable", q1.OldestAvailable, at(-5*time.Minute))
	if q1.Completed1m != 1 || q1.Failed1m != 2 {
		t.Errorf("q1 Completed1m %d Failed1m %d, want 1 and 2", q1.Completed1m, q1.Failed1m)
	}

	all, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Tenant: "", Now: now})
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if got := count(all, "q1", idemtype.StateAvailable); got != 3 {
		t.Errorf("all tenants q1 available = %d, want 3", got)
	}
	wantTimeP(t, "all tenants q1 OldestAvailable", queueStat(all, "q1").OldestAvailable, at(-time.Hour))

	later, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Tenant: "a", Now: at(10 * time.Minute)})
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if q := queueStat(later, "q1"); q == nil || q.Completed1m != 0 || q.Failed1m != 0 {
		t.Errorf("q1 ten minutes later: %+v, want no attempts in the last minute", q)
	}
	if q := queueStat(later, "q2"); q == nil || q.OldestAvailable == nil {
		t.Errorf("q2: %+v", q)
	}
	if q := queueStat(stats, "q2"); q != nil && q.OldestAvailable != nil {
		wantTime(t, "q2 OldestAvailable", *q.OldestAvailable, at(0))
	}
}

func testListLimit(t *testing.T, s store.Store) {
	ps := make([]*store.JobInsertParams, store.MaxListLimit+1)
	for i := range ps {
		ps[i] = newJob("k")
	}
	insertNew(t, s, at(0), ps...)
	for _, limit := range []int{0, -1, store.MaxListLimit + 1, 10 * store.MaxListLimit} {
		jobs, _, err := s.JobList(t.Context(), &store.JobListParams{Limit: limit})
		wantOK(t, "JobList", err)
		if len(jobs) != store.MaxListLimit {
			t.Errorf("JobList limit %d: %d jobs, want %d", limit, len(jobs), store.MaxListLimit)
		}
	}
	jobs, _, err := s.JobList(t.Context(), &store.JobListParams{Limit: 7})
	wantOK(t, "JobList", err)
	if len(jobs) != 7 {
		t.Errorf("JobList limit 7: %d jobs", len(jobs))
	}
}

func testJobDurations(t *testing.T, s store.Store) {
	mk := func(tenant, queue string) *idemtype.JobRow {
		p := newJob("k")
		p.Tenant, p.Queue, p.RunAt = tenant, queue, at(0)
		return insert1(t, s, at(0), p)
	}
	// q1: three completed at 10s, 11s, 12s (started 5 s after run_at);
	// q2: one; tenant b: one; one dead job; one completed before Since.
	completeJob(t, s, mk("a", "old"), at(time.Second), `1`)
	for i := range 3 {
		j := claimJob(t, s, mk("a", "q1"), at(5*time.Second))
		finish1(t, s, completion(j, `1`, at(time.Duration(10+i)*time.Second)))
	}
	completeJob(t, s, mk("a", "q2"), at(20*time.Second), `1`)
	completeJob(t, s, mk("b", "q1"), at(20*time.Second), `1`)
	killJob(t, s, mk("a", "q2"), at(20*time.Second))

	got, err := s.JobDurations(t.Context(), &store.JobDurationsParams{Tenant: "a", Since: at(5 * time.Second), PerQueue: 2})
	if err != nil {
		t.Fatalf("JobDurations: %v", err)
	}
	per := map[string][]*store.JobDuration{}
	for _, d := range got {
		per[d.Queue] = append(per[d.Queue], d)
	}
	if len(per) != 2 || len(per["q1"]) != 2 || len(per["q2"]) != 1 {
		t.Fatalf("durations per queue: q1 %d, q2 %d, queues %d; want 2, 1, 2", len(per["q1"]), len(per["q2"]), len(per))
	}
	q1 := per["q1"]
	wantTime(t, "q1 newest finish", q1[0].FinishedAt, at(12*time.Second))
	wantTime(t, "q1 second finish", q1[1].FinishedAt, at(11*time.Second))
	wantTime(t, "q1 run_at", q1[0].RunAt, at(0))
	wantTime(t, "q1 started", q1[0].StartedAt, at(5*time.Second))
	all, err := s.JobDurations(t.Context(), &store.JobDurationsParams{Since: at(0)})
	if err != nil || len(all) != 6 {
		t.Fatalf("every tenant: %d durations (%v), want 6", len(all), err)
	}
}
