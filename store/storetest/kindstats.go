package storetest

import (
	"maps"
	"math"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func kindStatsCases() []testCase {
	return []testCase{
		{"JobKindStats/counts_per_kind_and_state", testKindStatsCounts},
		{"JobKindStats/tenant_scope", testKindStatsTenant},
		{"JobKindStats/since_bound", testKindStatsSince},
		{"JobKindStats/durations_skip_cached", testKindStatsDurations},
	}
}

// kindStats runs JobKindStats and returns its stats by kind.
func kindStats(t *testing.T, s store.Store, tenant string, since time.Time) map[string]*store.JobKindStat {
	t.Helper()
	got, err := s.JobKindStats(t.Context(), &store.JobKindStatsParams{Tenant: tenant, Since: since})
	if err != nil {
		t.Fatalf("JobKindStats: %v", err)
	}
	out := map[string]*store.JobKindStat{}
	for i, k := range got {
		if i > 0 && got[i-1].Kind >= k.Kind {
			t.Errorf("JobKindStats not sorted by kind: %q after %q", k.Kind, got[i-1].Kind)
		}
		out[k.Kind] = k
	}
	return out
}

// kindJob inserts a job of kind in tenant and queue (unique per claimed
// job, so claimJob finds it) at created.
func kindJob(t *testing.T, s store.Store, tenant, queue, kind string, created time.Time) *idemtype.JobRow {
	t.Helper()
	p := newJob(kind)
	p.Tenant, p.Queue, p.RunAt = tenant, queue, created
	return insert1(t, s, created, p)
}

// kindStatsScenario creates, in tenant a, one job of kind "send" in every
// state (two completed runs of 1 s and 3 s, one completed on a second
// attempt in 5 s), one "other" job, and one "send" job in tenant b.
func kindStatsScenario(t *testing.T, s store.Store) {
	t.Helper()
	for i, d := range []time.Duration{time.Second, 3 * time.Second} {
		j := claimJob(t, s, kindJob(t, s, "a", "done"+itoa(int64(i)), "send", at(0)), at(10*time.Second))
		finish1(t, s, completion(j, `1`, at(10*time.Second+d)))
	}
	again := claimJob(t, s, kindJob(t, s, "a", "again", "send", at(0)), at(10*time.Second))
	finish1(t, s, failure(again, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(20*time.Second), at(11*time.Second)))
	again = claimJob(t, s, again, at(30*time.Second))
	finish1(t, s, completion(again, `1`, at(35*time.Second)))
	killJob(t, s, kindJob(t, s, "a", "dead", "send", at(0)), at(10*time.Second))
	r := claimJob(t, s, kindJob(t, s, "a", "retry", "send", at(0)), at(10*time.Second))
	finish1(t, s, failure(r, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Hour), at(11*time.Second)))
	claimJob(t, s, kindJob(t, s, "a", "run", "send", at(0)), at(10*time.Second))
	avail := kindJob(t, s, "a", "q", "send", at(0))
	p := newJob("send")
	p.Tenant, p.Queue, p.RunAt = "a", "q", at(time.Hour)
	insert1(t, s, at(0), p) // scheduled
	p = newJob("send")
	p.Tenant, p.Queue, p.DependsOn = "a", "q", []int64{avail.ID}
	if j := insert1(t, s, at(0), p); j.State != idemtype.StatePending {
		t.Fatalf("dependant: %s, want pending", j.State)
	}
	cancelJob(t, s, kindJob(t, s, "a", "q", "send", at(0)), at(time.Second))
	kindJob(t, s, "a", "q", "other", at(0))
	kindJob(t, s, "b", "q", "send", at(0))
}

func testKindStatsCounts(t *testing.T, s store.Store) {
	kindStatsScenario(t, s)
	got := kindStats(t, s, "a", at(0))
	if len(got) != 2 {
		t.Fatalf("kinds: %d, want send and other", len(got))
	}
	send := got["send"]
	wantStates := map[idemtype.JobState]int64{idemtype.StateCompleted: 3, idemtype.StateDead: 1,
		idemtype.StateRetryable: 1, idemtype.StateRunning: 1, idemtype.StateAvailable: 1,
		idemtype.StateScheduled: 1, idemtype.StatePending: 1, idemtype.StateCancelled: 1}
	if !maps.Equal(send.States, wantStates) {
		t.Errorf("send states %v, want %v", send.States, wantStates)
	}
	// Started: 3 completed, dead, retryable, running (cancelled, pending,
	// scheduled and available never ran).
	if send.Count != 10 || send.Started != 6 || send.Retried != 2 || send.Failed != 2 {
		t.Errorf("send count %d started %d retried %d failed %d, want 10, 6, 2, 2", send.Count, send.Started, send.Retried, send.Failed)
	}
	other := got["other"]
	if other.Count != 1 || other.States[idemtype.StateAvailable] != 1 || other.Started != 0 || other.Retried != 0 || other.Failed != 0 || other.Runs != 0 {
		t.Errorf("other: %+v, want one available job", other)
	}
}

func testKindStatsTenant(t *testing.T, s store.Store) {
	kindStatsScenario(t, s)
	if b := kindStats(t, s, "b", at(0)); len(b) != 1 || b["send"].Count != 1 || b["send"].States[idemtype.StateAvailable] != 1 {
		t.Errorf("tenant b: %v, want one available send job", b)
	}
	all := kindStats(t, s, "", at(0))
	if all["send"].Count != 11 || all["send"].States[idemtype.StateAvailable] != 2 || all["other"].Count != 1 {
		t.Errorf("every tenant: send %+v other %+v, want 11 send jobs (2 available) and 1 other", all["send"], all["other"])
	}
	if none := kindStats(t, s, "c", at(0)); len(none) != 0 {
		t.Errorf("tenant c: %v, want nothing", none)
	}
}

func testKindStatsSince(t *testing.T, s store.Store) {
	// Created before Since, every one finished or live after it: none counts.
	old := claimJob(t, s, kindJob(t, s, "a", "old1", "old", at(-2*time.Hour)), at(-time.Minute))
	finish1(t, s, completion(old, `1`, at(time.Minute)))
	killJob(t, s, kindJob(t, s, "a", "old2", "old", at(-2*time.Hour)), at(time.Minute))
	claimJob(t, s, kindJob(t, s, "a", "old3", "old", at(-2*time.Hour)), at(time.Minute))
	kindJob(t, s, "a", "q", "old", at(-time.Microsecond))
	// Created exactly at Since and after it: counted.
	kindJob(t, s, "a", "q", "new", at(0))
	completeJob(t, s, kindJob(t, s, "a", "new1", "new", at(time.Minute)), at(2*time.Minute), `1`)
	// Created after Since by one node's clock, finished before it by
	// another's (within store.KindStatsSkew): counted.
	p := newJob("new")
	p.Tenant, p.Queue, p.RunAt = "a", "skewed", at(-40*time.Minute)
	skewed := claimJob(t, s, insert1(t, s, at(time.Minute), p), at(-35*time.Minute))
	finish1(t, s, completion(skewed, `1`, at(-30*time.Minute)))
	got := kindStats(t, s, "a", at(0))
	if _, ok := got["old"]; ok || got["new"] == nil || got["new"].Count != 3 || got["new"].States[idemtype.StateCompleted] != 2 {
		t.Errorf("since at(0): %v, want only the 3 new jobs (2 completed)", got)
	}
	if all := kindStats(t, s, "a", at(-3*time.Hour)); all["old"] == nil || all["old"].Count != 4 || all["new"].Count != 3 {
		t.Errorf("since at(-3h): %v, want 4 old and 3 new jobs", all)
	}
}

func testKindStatsDurations(t *testing.T, s store.Store) {
	kindStatsScenario(t, s)
	// A completion from the cache: completed, counted, but no run.
	c := claimJob(t, s, kindJob(t, s, "a", "cached", "send", at(0)), at(10*time.Second))
	fin := completion(c, `1`, at(10*time.Minute))
	fin.WasCached = true
	finish1(t, s, fin)
	send := kindStats(t, s, "a", at(0))["send"]
	// Runs of 1 s, 3 s and 5 s (the second attempt, from its own start).
	if send.Runs != 3 || send.States[idemtype.StateCompleted] != 4 {
		t.Errorf("send runs %d completed %d, want 3 and 4", send.Runs, send.States[idemtype.StateCompleted])
	}
	if math.Abs(send.AvgDurationMS-3000) > 0.01 || math.Abs(send.MaxDurationMS-5000) > 0.01 {
		t.Errorf("send avg %v max %v ms, want 3000 and 5000", send.AvgDurationMS, send.MaxDurationMS)
	}
	if other := kindStats(t, s, "a", at(0))["other"]; other.AvgDurationMS != 0 || other.MaxDurationMS != 0 {
		t.Errorf("other (no runs): avg %v max %v, want 0", other.AvgDurationMS, other.MaxDurationMS)
	}
}
