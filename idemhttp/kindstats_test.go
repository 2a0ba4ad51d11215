package idemhttp_test

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// insertKind inserts n available jobs of kind in tenant and queue.
func (e *env) insertKind(tenant, queue, kind string, n int, now time.Time) {
	e.t.Helper()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Tenant: tenant, Queue: queue, Kind: kind, Args: json.RawMessage(`{}`),
			MaxAttempts: 3, RunAt: now}
	}
	res, err := e.st.JobInsertMany(e.t.Context(), &store.JobInsertManyParams{Jobs: ps, Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			e.t.Fatal(r.Err)
		}
	}
}

// failAll claims every job of queue at now and ends each attempt in state.
func (e *env) failAll(queue string, state idemtype.JobState, now time.Time) {
	e.t.Helper()
	jobs, err := e.st.JobClaim(e.t.Context(), &store.JobClaimParams{Queues: []string{queue}, WorkerID: "w",
		Limit: 100, LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(jobs) == 0 {
		e.t.Fatalf("claim %s: %d jobs, %v", queue, len(jobs), err)
	}
	ps := make([]*store.JobFinishParams, len(jobs))
	for i, j := range jobs {
		ps[i] = &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: state, Outcome: idemtype.OutcomeFailed,
			Error: "boom", RunAt: now, FinishedAt: now.Add(time.Millisecond), DurationMS: 1}
		if state == idemtype.StateDead {
			ps[i].Outcome = idemtype.OutcomeDead
		}
	}
	if _, err := e.st.JobFinishMany(e.t.Context(), ps); err != nil {
		e.t.Fatal(err)
	}
}

// TestKindStatsExact: /v1/stats counts every job of each kind created in
// the last 24 hours, not the newest 500 (seed 002's stats by action and
// status, seed 004's health per function), and the 24 h health checks
// (failed per kind, retry rate) read the same exact figures: ten jobs
// that failed twice, then 600 newer jobs of another kind.
func TestKindStatsExact(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	now := time.Now()
	e.insertKind("a", "f", "flaky", 10, now.Add(-time.Hour))
	e.failAll("f", idemtype.StateRetryable, now.Add(-time.Hour))
	e.failAll("f", idemtype.StateDead, now.Add(-50*time.Minute))
	e.insertKind("a", "bulk", "bulk", 600, now.Add(-time.Minute))
	e.insertKind("b", "bulk", "bulk", 3, now.Add(-time.Minute))

	r := e.req("GET", "/v1/stats", e.keyA, nil)
	expect(t, r, 200, "")
	var body struct {
		Kinds map[string]struct {
			Count     int64            `json:"count"`
			Retried   int64            `json:"retried"`
			Failed24h int64            `json:"failed_24h"`
			States    map[string]int64 `json:"states"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	bulk, flaky := body.Kinds["bulk"], body.Kinds["flaky"]
	if bulk.Count != 600 || !maps.Equal(nonZero(bulk.States), map[string]int64{"available": 600}) || len(bulk.States) != 8 {
		t.Errorf("bulk: %+v, want 600 available jobs (every state listed)", bulk)
	}
	if flaky.Count != 10 || flaky.Retried != 10 || flaky.Failed24h != 10 || !maps.Equal(nonZero(flaky.States), map[string]int64{"dead": 10}) {
		t.Errorf("flaky: %+v, want 10 dead jobs, each retried", flaky)
	}

	r = e.req("GET", "/v1/stats?all_tenants=true", e.admin, nil)
	expect(t, r, 200, "")
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Kinds["bulk"].Count != 603 {
		t.Errorf("every tenant: bulk %+v, want 603", body.Kinds["bulk"])
	}

	_, checks := e.healthOf(e.keyA)
	wantCheck(t, checks, "failed_per_kind_24h", "degraded")
	wantCheck(t, checks, "retry_rate_24h", "degraded")
	if rate := checks["retry_rate_24h"].(map[string]any)["value"]; rate != float64(1) {
		t.Errorf("retry rate %v, want 1 (10 of 10 started jobs retried)", rate)
	}
}

// nonZero returns the entries of m that are not 0.
func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
