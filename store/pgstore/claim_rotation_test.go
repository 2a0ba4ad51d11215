package pgstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestRotationAcrossPaths: a claim starts after the tenant where the
// store's previous claim of the queue stopped whichever path (one
// statement or general) took each claim, and a claim that finds no
// claimable work leaves the rotation where it was. The one-statement
// claims visit the lone tenant of the previous claim without probing it
// (solo); a general-path claim in between once moved the cursor without
// forgetting that tenant, so a later claim with no work at all "visited"
// it anyway and moved the cursor onto it (seed 118 of
// TestLimitedClaimOneRoundMatchesGeneralPath, 15 claims before the claims
// parted).
//
// Each case: t3's only job is claimed by a one-statement claim (solo t3);
// t2's only job by the general path (the cursor at t2); the one-statement
// claim then finds nothing; t1 and t3 get a job each, and a claim of one
// must take t3's, the first tenant after t2.
func TestRotationAcrossPaths(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// limit, when set, is put before the first claim (the queue is
		// limited); else the general claim is made by a weight, deleted
		// before the empty claims (two: the first finds the weight gone).
		limit    *store.Limit
		reserved bool
	}{
		{name: "one_round_limited", limit: &store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 100}},
		{name: "reserved", limit: &store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 1000, Period: time.Minute}, reserved: true},
		{name: "fast_unlimited"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testRotationAcrossPaths(t, c.limit, c.reserved)
		})
	}
}

func testRotationAcrossPaths(t *testing.T, limit *store.Limit, reserved bool) {
	ctx := context.Background()
	s := newTestStore(t, 2)
	s.noReserve = !reserved
	now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	insert := func(tenants ...string) {
		t.Helper()
		ps := make([]*store.JobInsertParams, len(tenants))
		for i, tn := range tenants {
			ps[i] = &store.JobInsertParams{Tenant: tn, Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now}
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(l store.Limit) {
		t.Helper()
		if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: l, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(mode oneRoundMode, n int, want ...string) {
		t.Helper()
		s.oneRoundMode = mode
		got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: n,
			LeaseUntil: now.Add(time.Hour), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		var tenants []string
		for _, j := range got {
			tenants = append(tenants, j.Tenant)
		}
		if len(tenants) != len(want) || (len(want) > 0 && tenants[0] != want[0]) {
			t.Fatalf("claimed the jobs of %v, want %v (cursor %q)", tenants, want, s.cursors.Get("q"))
		}
	}
	// taken counts the claims the one-statement path under test took.
	taken := func() int64 {
		if reserved {
			return s.reservedTaken.Load()
		}
		return s.oneRoundTaken.Load()
	}
	if limit != nil {
		put(*limit)
	}
	insert("t3")
	claim(oneRoundAlways, 2, "t3")
	insert("t2")
	if limit != nil {
		claim(oneRoundNever, 2, "t2")
		before := taken()
		claim(oneRoundAlways, 2)
		if taken() != before+1 {
			t.Fatalf("the one-statement claim took %d of the empty claim, want 1 (the test no longer covers it)", taken()-before)
		}
	} else {
		weight := store.Limit{FlowScope: store.FlowScope{Tenant: "t9"}, Weight: 2}
		put(weight)
		claim(oneRoundAuto, 2, "t2") // the guard finds the weight: the general path
		if err := s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: weight.FlowScope}); err != nil {
			t.Fatal(err)
		}
		claim(oneRoundAuto, 2) // the general path, which finds no rows
		if s.flowHints.get("q") {
			t.Fatal("the queue is still hinted to have flow rows: the next claim would not be the fast one")
		}
		claim(oneRoundAuto, 2) // the fast claim (qClaimOne)
	}
	if got := s.cursors.Get("q"); got != "t2" {
		t.Errorf("after claims that found no work the cursor is %q, want t2 (where the last claim that visited stopped)", got)
	}
	insert("t1", "t3")
	claim(oneRoundNever, 1, "t3")
}
