package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// A claim held back only by a tenant at its concurrency, whose limit also
// has a rate with room left, reports no refill time on every path that
// takes it (the one-round-trip claim, the reserved claim, the general
// path): the rate window's end is not when the tenant can start again. The
// one-round claim reported the window's end of every limit with a rate it
// skipped a tenant for, so a pull worker was told to retry after up to a
// whole period.
func TestLimitedClaimConcurrencyReportsNoRefill(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"one-round", "reserved", "general"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := newTestStore(t, 2)
			s.oneRoundMode, s.noReserve = oneRoundAlways, mode != "reserved"
			if mode == "general" {
				s.oneRoundMode = oneRoundNever
			}
			now := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
			if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: store.Limit{FlowScope: store.FlowScope{Tenant: "a"},
				Rate: 100, Period: time.Hour, Concurrency: 1}, Now: now}); err != nil {
				t.Fatal(err)
			}
			var ps []*store.JobInsertParams
			for i := range 6 {
				ps = append(ps, &store.JobInsertParams{Tenant: []string{"a", "b"}[i%2], Queue: "q", Kind: "k",
					Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now})
			}
			if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
				t.Fatal(err)
			}
			if got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Tenant: "a", WorkerID: "w", Limit: 1,
				LeaseUntil: now.Add(time.Hour), Now: now}); err != nil || len(got) != 1 {
				t.Fatalf("claim of a: %d jobs, %v; want 1", len(got), err)
			}
			took := s.oneRoundTaken.Load() + s.reservedTaken.Load()
			var rep store.ClaimReport
			got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1,
				LeaseUntil: now.Add(time.Hour), Now: now.Add(time.Second), Report: &rep})
			if err != nil {
				t.Fatal(err)
			}
			var tenants []string
			for _, j := range got {
				tenants = append(tenants, j.Tenant)
			}
			if fmt.Sprint(tenants) != "[b]" || !rep.Throttled || !rep.NextRefill.IsZero() {
				t.Fatalf("claim with a at its concurrency took the jobs of %v, report %+v; want one of b, throttled, no refill",
					tenants, rep)
			}
			// The reserved claim leaves a tenant at a limit that also has a
			// rate to the locking claims (docs/flow-control.md), which
			// report as the path they take does.
			if n := s.oneRoundTaken.Load() + s.reservedTaken.Load() - took; mode == "one-round" && n != 1 || mode == "general" && n != 0 {
				t.Fatalf("%s: the fast paths took %d claims (the test no longer covers this path)", mode, n)
			}
		})
	}
}
