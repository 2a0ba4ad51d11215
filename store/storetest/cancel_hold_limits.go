package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// cancelHoldLimitCases: a job cancelled while it runs holds its lease (and
// a job of a FIFO partition its partition) until its handler is known to
// have returned (the hold: JobCancel); until then it takes its slot under every
// concurrency limit of its scope, since its handler may still run: a
// concurrency limit bounds the handlers that run at once. A holding job
// retried (JobRetryMany) keeps taking that slot until its old lease ends.
func cancelHoldLimitCases() []testCase {
	var out []testCase
	for _, c := range holdLimitScopes {
		out = append(out, testCase{"Limits/cancel_hold_counts_against_" + c.name, func(t *testing.T, s store.Store) {
			testCancelHoldLimit(t, s, c.scope)
		}}, testCase{"Limits/retried_hold_counts_against_" + c.name, func(t *testing.T, s store.Store) {
			testRetriedHoldLimit(t, s, c.scope)
		}})
	}
	return out
}

// holdLimitScopes are the concurrency limits the hold is counted by: the
// queue's, the tenant's (every queue, and in the queue), and the defaults
// of tenant "*" (in the queue, and every queue).
var holdLimitScopes = []struct {
	name  string
	scope store.FlowScope
}{
	{"queue_concurrency", store.FlowScope{Queue: "q"}},
	{"tenant_concurrency", store.FlowScope{Tenant: "a"}},
	{"tenant_concurrency_in_queue", store.FlowScope{Tenant: "a", Queue: "q"}},
	{"default_concurrency_in_queue", store.FlowScope{Tenant: store.EveryTenant, Queue: "q"}},
	{"default_concurrency", store.FlowScope{Tenant: store.EveryTenant}},
}

// RunCancelHoldLimits runs the cancel-hold cases of concurrency limits
// (also part of Run), each on its own store from newStore: a backend with
// several claim paths runs them once per path.
func RunCancelHoldLimits(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	runCases(t, cancelHoldLimitCases(), newStore)
}

// testCancelHoldLimit: under a concurrency of 1 in scope, tenant a's job
// of partition A runs and is cancelled: while it holds its partition, no
// other job of the scope starts — not one of another partition, nor one of
// none — until the refused finish of its lease acknowledges the cancel.
// The next one (partition B) is cancelled in turn and holds until its
// lease ends and the rescuer ends the hold. A cancelled job of no
// partition holds its slot too, until its refused finish. Tenant b's work,
// outside a tenant's scope, is claimed all along; under the queue's limit
// it waits as a's does. The limit's usage counts the hold as running.
func testCancelHoldLimit(t *testing.T, s store.Store, scope store.FlowScope) {
	putLimit(t, s, store.Limit{FlowScope: scope, Concurrency: 1})
	job := func(tenant, kind, part string) *store.JobInsertParams {
		p := partitioned(kind, "q", part)
		p.Tenant = tenant
		return p
	}
	js := insertNew(t, s, at(0), job("a", "a1", "A"), job("a", "a2", "B"), job("a", "a3", ""), job("a", "a4", ""))
	b := insertNew(t, s, at(0), job("b", "b1", ""))[0]
	tenantScope := scope.Tenant != ""
	// Claims of one job: a claim that fits the budget as a whole, which a
	// store's one-statement claims may take (blocked tries ten too).
	claimN := func(tenant string, now time.Time, n int) []*idemtype.JobRow {
		t.Helper()
		return claimWith(t, s, &store.JobClaimParams{Queues: []string{"q"}, Tenant: tenant, WorkerID: "w1", Limit: n,
			LeaseUntil: now.Add(lease), Now: now})
	}
	claimOf := func(tenant string, now time.Time) []*idemtype.JobRow {
		t.Helper()
		return claimN(tenant, now, 1)
	}
	// usage is the limit's running count as LimitList reports it (to the
	// tenant for a default: its copy's usage).
	usage := func(now time.Time) int { t.Helper(); return scopeRunning(t, s, scope, now) }
	// blocked claims a's work at now and wants none, and b's when it is
	// outside the scope.
	blocked := func(what string, now time.Time) {
		t.Helper()
		for _, n := range []int{1, 10} {
			if got := claimN("a", now, n); len(got) != 0 {
				t.Fatalf("%s: a claim of %d took %v under a concurrency of 1 in %+v while the cancelled job's handler may still run",
					what, n, ids(got), scope)
			}
		}
		if !tenantScope || b == nil {
			return
		}
		got := claimOf("b", now)
		wantIDs(t, what+": tenant b, outside the scope", ids(got), []int64{b.ID})
		finish1(t, s, completion(got[0], `1`, now))
		b = nil
	}

	// Acknowledged by the refused finish.
	c := claimOf("a", at(0))
	wantIDs(t, "first claim", ids(c), []int64{js[0].ID})
	cancelJob(t, s, c[0], at(time.Second))
	if n := usage(at(time.Second)); n != 1 {
		t.Errorf("the limit's usage counts %d running while the cancelled job holds, want 1", n)
	}
	blocked("cancelled head holding its partition", at(2*time.Second))
	if errs := finishAll(t, s, completion(c[0], `1`, at(3*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled job: %v, want ErrLeaseLost", errs[0])
	}
	if n := usage(at(3 * time.Second)); n != 0 {
		t.Errorf("the limit's usage counts %d running after the acknowledgement, want 0", n)
	}
	c = claimOf("a", at(4*time.Second))
	wantIDs(t, "after the acknowledgement", ids(c), []int64{js[1].ID})

	// Ended by the rescuer once the lease ended.
	end := at(4*time.Second + lease)
	cancelJob(t, s, c[0], at(5*time.Second))
	blocked("second cancelled job holding its partition", at(6*time.Second))
	rescue(t, s, end.Add(-time.Second), 100)
	blocked("before its lease ended", end.Add(-time.Second))
	rescue(t, s, end.Add(time.Second), 100)
	wantState(t, s, js[1].ID, idemtype.StateCancelled)
	c = claimOf("a", end.Add(2*time.Second))
	wantIDs(t, "after the rescuer ended the hold", ids(c), []int64{js[2].ID})

	// A job of no partition holds its slot as well: its handler may still
	// run. Acknowledged by its refused finish.
	cancelJob(t, s, c[0], end.Add(3*time.Second))
	if n := usage(end.Add(3 * time.Second)); n != 1 {
		t.Errorf("the limit's usage counts %d running while the cancelled job of no partition holds, want 1", n)
	}
	blocked("cancelled job of no partition", end.Add(4*time.Second))
	if errs := finishAll(t, s, completion(c[0], `1`, end.Add(5*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled job of no partition: %v, want ErrLeaseLost", errs[0])
	}
	wantIDs(t, "after the acknowledgement of a job of no partition", ids(claimOf("a", end.Add(6*time.Second))), []int64{js[3].ID})
}

// testRetriedHoldLimit: under a concurrency of 1 in scope, tenant a's job
// A of partition A runs, is cancelled (it holds its partition) and is
// retried while its handler may still run: it waits to run again until its
// old lease ends, and until then it still takes its slot, since the old
// handler may still run. Jobs of the scope enqueued meanwhile (one of
// another partition, one of none) wait; the old handler's refused finish
// does not free the slot (the retried job is no longer cancelled: its
// hold lasts, as for the head rule, until the old lease ends). Once that
// lease ended the slot is free (B is claimed at that instant), and A
// itself is claimed in its turn: its own old lease does not hold it back.
// Tenant b's work, outside a tenant's scope, is claimed all along. The
// limit's usage counts the retried job until the old lease ends.
func testRetriedHoldLimit(t *testing.T, s store.Store, scope store.FlowScope) {
	ctx := t.Context()
	putLimit(t, s, store.Limit{FlowScope: scope, Concurrency: 1})
	job := func(tenant, kind, part string) *store.JobInsertParams {
		p := partitioned(kind, "q", part)
		p.Tenant = tenant
		return p
	}
	tenantScope := scope.Tenant != ""
	claimKinds := func(tenant string, now time.Time, n int, kinds ...string) []*idemtype.JobRow {
		t.Helper()
		return claimWith(t, s, &store.JobClaimParams{Queues: []string{"q"}, Tenant: tenant, Kinds: kinds, WorkerID: "w1",
			Limit: n, LeaseUntil: now.Add(lease), Now: now})
	}
	usage := func(now time.Time) int { t.Helper(); return scopeRunning(t, s, scope, now) }
	a := insertNew(t, s, at(0), job("a", "a1", "A"))[0]
	b := insertNew(t, s, at(0), job("b", "b1", ""))[0]
	// blocked claims a's work at now and wants none, and b's when it is
	// outside the scope.
	blocked := func(what string, now time.Time) {
		t.Helper()
		for _, n := range []int{1, 10} {
			if got := claimKinds("a", now, n); len(got) != 0 {
				t.Fatalf("%s: a claim of %d took %v under a concurrency of 1 in %+v while the retried job's old handler may still run",
					what, n, ids(got), scope)
			}
		}
		if !tenantScope || b == nil {
			return
		}
		got := claimKinds("b", now, 1)
		wantIDs(t, what+": tenant b, outside the scope", ids(got), []int64{b.ID})
		finish1(t, s, completion(got[0], `1`, now))
		b = nil
	}

	c := claimKinds("a", at(0), 1)
	wantIDs(t, "first claim", ids(c), []int64{a.ID})
	end := at(lease) // the old lease's end
	cancelJob(t, s, c[0], at(time.Second))
	if _, err := s.JobRetryMany(ctx, &store.JobRetryManyParams{IDs: []int64{a.ID}, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if r := wantState(t, s, a.ID, idemtype.StateScheduled); !r.RunAt.Equal(end) {
		t.Errorf("retried holding job: run_at %v, want the old lease's end %v", r.RunAt, end)
	}
	js := insertNew(t, s, at(3*time.Second), job("a", "a2", "B"), job("a", "a3", ""))
	if n := usage(at(3 * time.Second)); n != 1 {
		t.Errorf("the limit's usage counts %d running while the retried job's old handler may still run, want 1", n)
	}
	blocked("retried job holding its old lease", at(4*time.Second))
	if errs := finishAll(t, s, completion(c[0], `1`, at(5*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the old attempt: %v, want ErrLeaseLost", errs[0])
	}
	blocked("after the old attempt's refused finish", at(6*time.Second))
	rescue(t, s, end.Add(-time.Second), 100)
	blocked("just before the old lease ends", end.Add(-time.Second))
	if n := usage(end.Add(-time.Second)); n != 1 {
		t.Errorf("the limit's usage counts %d running just before the old lease ends, want 1", n)
	}
	if n := usage(end); n != 0 {
		t.Errorf("the limit's usage counts %d running once the old lease ended, want 0", n)
	}

	// The old lease ended: the slot is free, B (enqueued before A's new
	// run_at) goes first, then A in its turn, then the job of no partition.
	c = claimKinds("a", end, 1)
	wantIDs(t, "once the old lease ended", ids(c), []int64{js[0].ID})
	if got := claimKinds("a", end, 10); len(got) != 0 {
		t.Fatalf("claimed %v beside B under a concurrency of 1", ids(got))
	}
	finish1(t, s, completion(c[0], `1`, end.Add(time.Second)))
	c = claimKinds("a", end.Add(2*time.Second), 10, "a1")
	wantIDs(t, "the retried job after its old lease ended", ids(c), []int64{a.ID})
	if got := claimKinds("a", end.Add(3*time.Second), 10); len(got) != 0 {
		t.Fatalf("claimed %v beside the retried job's new run under a concurrency of 1", ids(got))
	}
	if n := usage(end.Add(3 * time.Second)); n != 1 {
		t.Errorf("the limit's usage counts %d running during the retried job's new run, want 1", n)
	}
	finish1(t, s, completion(c[0], `1`, end.Add(4*time.Second)))
	wantIDs(t, "after the retried job's new run", ids(claimKinds("a", end.Add(5*time.Second), 10)), []int64{js[1].ID})
}

// scopeRunning is the running count of the limit of scope as LimitList
// reports it at now (to tenant "a" for a default: its copy's usage).
func scopeRunning(t *testing.T, s store.Store, scope store.FlowScope, now time.Time) int {
	t.Helper()
	tenant := ""
	if scope.IsDefault() {
		tenant = "a"
	}
	ls, err := s.LimitList(t.Context(), &store.LimitListParams{Tenant: tenant, Now: now})
	if err != nil {
		t.Fatalf("LimitList: %v", err)
	}
	for _, l := range ls {
		if l.FlowScope == scope {
			return l.Running
		}
	}
	t.Fatalf("LimitList(%q) has no limit of %+v: %+v", tenant, scope, ls)
	return 0
}

// RetriedHold makes a holding job retried in s, as a migration test needs
// one: a job of tenant "t1", queue "q", partition "p" claimed at now with
// a lease to now + 1 minute, cancelled at now + 1 s (it holds its
// partition: its handler may still run) and retried at now + 2 s (it
// waits, keeping its old lease's end). It returns that end.
func RetriedHold(t *testing.T, s store.Store, now time.Time) time.Time {
	t.Helper()
	ctx := t.Context()
	end := now.Add(time.Minute)
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Now: now, Jobs: []*store.JobInsertParams{{
		Tenant: "t1", Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now, PartitionKey: "p"}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	c, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1, LeaseUntil: end, Now: now})
	if err != nil || len(c) != 1 {
		t.Fatal(err, c)
	}
	if _, err := s.JobCancel(ctx, &store.JobCancelParams{ID: c[0].ID, Now: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobRetryMany(ctx, &store.JobRetryManyParams{IDs: []int64{c[0].ID}, Now: now.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	return end
}
