package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// BenchClaimTenants measures claims of 10 jobs from a queue whose backlog
// is spread over tenants, without limits or with limits in force on every
// claim (a queue rate and concurrency and a rate on up to 100 tenants, all
// high enough never to throttle: the cost measured is the bookkeeping).
// Each claimed job is completed with the timer stopped, so running counts
// stay small as in a live system. A backend's benchmark calls it with a
// fresh store.
func BenchClaimTenants(b *testing.B, s store.Store, tenants int, limits bool) {
	ctx := context.Background()
	const per = 10
	now := time.Now()
	total := max(b.N*per, tenants)
	ps := make([]*store.JobInsertParams, 0, store.MaxBatch)
	for i := range total {
		p := newJob("bench")
		p.Tenant = fmt.Sprintf("t%05d", i%tenants)
		p.RunAt = now
		ps = append(ps, p)
		if len(ps) == cap(ps) || i == total-1 {
			if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
				b.Fatal(err)
			}
			ps = ps[:0]
		}
	}
	if limits {
		put := func(l store.Limit) {
			if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: l}); err != nil {
				b.Fatal(err)
			}
		}
		put(store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: 1 << 30, Period: time.Minute, Concurrency: 1 << 30})
		for i := range min(tenants, 100) {
			put(store.Limit{FlowScope: store.FlowScope{Tenant: fmt.Sprintf("t%05d", i)}, Rate: 1 << 30, Period: time.Minute})
		}
	}
	b.ResetTimer()
	claimed := 0
	for range b.N {
		jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "bench",
			Limit: per, LeaseUntil: now.Add(time.Hour), Now: now})
		if err != nil {
			b.Fatal(err)
		}
		claimed += len(jobs)
		b.StopTimer()
		fins := make([]*store.JobFinishParams, len(jobs))
		for i, j := range jobs {
			fins[i] = completion(j, `1`, now)
		}
		if _, err := s.JobFinishMany(ctx, fins); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchListRareFilter measures one page of JobList whose filter matches
// only the oldest of a tenant's jobs (a rare kind, queue or time range),
// over history jobs in that tenant and as many in another: the worst case
// of lists that walk the tenant's jobs newest first (docs/indexes.md). The
// filter is named by what ("kind", "queue", "since"); history jobs are
// inserted once per store, before the timer starts.
func BenchListRareFilter(b *testing.B, s store.Store, history int, what string) {
	ctx := context.Background()
	now := time.Now()
	rare := newJob("rare")
	rare.Tenant, rare.Queue, rare.RunAt = "t1", "rare-queue", now
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{rare},
		Now: now.Add(-time.Hour)}); err != nil {
		b.Fatal(err)
	}
	ps := make([]*store.JobInsertParams, 0, store.MaxBatch)
	for i := range 2 * history {
		p := newJob("common")
		p.Tenant = []string{"t1", "t2"}[i%2]
		p.RunAt = now
		ps = append(ps, p)
		if len(ps) == cap(ps) || i == 2*history-1 {
			if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
				b.Fatal(err)
			}
			ps = ps[:0]
		}
	}
	f := store.JobFilter{Tenant: "t1"}
	switch what {
	case "kind":
		f.Kind = "rare"
	case "queue":
		f.Queue = "rare-queue"
	case "since":
		f.Since, f.Until = now.Add(-2*time.Hour), now.Add(-30*time.Minute)
	default:
		b.Fatalf("unknown filter %q", what)
	}
	b.ResetTimer()
	for range b.N {
		jobs, _, err := s.JobList(ctx, &store.JobListParams{Filter: f, Limit: 50})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Kind != "rare" {
			b.Fatalf("listed %d jobs, want the rare one", len(jobs))
		}
	}
}
