package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// benchConfig lets IDEM_BENCH_SYNC=NORMAL compare synchronous levels.
func benchConfig() *Config {
	return &Config{Synchronous: os.Getenv("IDEM_BENCH_SYNC")}
}

func reportJobs(b *testing.B, s *Store, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
	if n := s.w.batches.Load(); n > 0 {
		b.ReportMetric(float64(s.w.opsRun.Load())/float64(n), "ops/commit")
	}
}

// BenchmarkJobInsertSingleParallel: one job per call from ~16 goroutines,
// each with its own idempotency key (the HTTP enqueue path).
func BenchmarkJobInsertSingleParallel(b *testing.B) {
	benchSingle(b, 8) // × GOMAXPROCS (2) = 16 goroutines
}

// BenchmarkJobInsertSingleParallel64: as above from ~64 goroutines; group
// commit shares each fsync among more callers.
func BenchmarkJobInsertSingleParallel64(b *testing.B) {
	benchSingle(b, 32)
}

func benchSingle(b *testing.B, parallelism int) {
	s := openTest(b, benchConfig())
	var n atomic.Int64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			_, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{
				Jobs: []*store.JobInsertParams{keyedJob("bench", "k"+strconv.FormatInt(i, 10), "fp")}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportJobs(b, s, b.N)
}

// BenchmarkJobInsertBatch1000: 1,000 plain jobs per call.
func BenchmarkJobInsertBatch1000(b *testing.B) {
	s := openTest(b, benchConfig())
	ps := make([]*store.JobInsertParams, 1000)
	for i := range ps {
		ps[i] = job("bench")
		ps[i].RunAt = time.Time{}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: ps}); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, s, b.N*len(ps))
}

// BenchmarkJobInsertDuplicateKey: repeats of one key from ~16 goroutines.
func BenchmarkJobInsertDuplicateKey(b *testing.B) {
	s := openTest(b, benchConfig())
	insert(b, s, time.Now(), keyedJob("bench", "dup", "fp"))
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{
				Jobs: []*store.JobInsertParams{keyedJob("bench", "dup", "fp")}})
			if err != nil || !res[0].Existing {
				b.Errorf("dup insert: %v %+v", err, res)
				return
			}
		}
	})
	reportJobs(b, s, b.N)
}

// BenchmarkJobClaimFinish: claim 100 then finish those 100, per iteration.
func BenchmarkJobClaimFinish(b *testing.B) {
	s := openTest(b, benchConfig())
	ctx := context.Background()
	ps := make([]*store.JobInsertParams, 1000)
	for i := range ps {
		ps[i] = job("bench")
		ps[i].RunAt = time.Time{}
	}
	for done := 0; done < b.N*100; done += len(ps) {
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps}); err != nil {
			b.Fatal(err)
		}
	}
	fin := make([]*store.JobFinishParams, 0, 100)
	b.ResetTimer()
	for range b.N {
		now := time.Now()
		jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w",
			Limit: 100, LeaseUntil: now.Add(time.Minute), Now: now})
		if err != nil || len(jobs) != 100 {
			b.Fatalf("claim: %d %v", len(jobs), err)
		}
		fin = fin[:0]
		for _, j := range jobs {
			fin = append(fin, &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken,
				State: idemtype.StateCompleted, Outcome: idemtype.OutcomeCompleted,
				Result: []byte(`{}`), FinishedAt: now, DurationMS: 1})
		}
		errs, err := s.JobFinishMany(ctx, fin)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				b.Fatal(e)
			}
		}
	}
	reportJobs(b, s, b.N*100)
}

// BenchmarkClaimTenants: claims of 10 with 1, 100 and 10,000 tenants
// holding work, without and with limits (storetest.BenchClaimTenants).
func BenchmarkClaimTenants(b *testing.B) {
	for _, tenants := range []int{1, 100, 10000} {
		for _, limits := range []bool{false, true} {
			b.Run(fmt.Sprintf("tenants=%d/limits=%v", tenants, limits), func(b *testing.B) {
				storetest.BenchClaimTenants(b, openTest(b, benchConfig()), tenants, limits)
			})
		}
	}
}

// BenchmarkClaimLimitedCost: what limits cost a claim of 10 with 1, 100
// and 10,000 tenants, measured paired (storetest.BenchClaimLimitedCost),
// with each storetest.LimitShape: tenants' own rates, a default rate for
// every tenant, tenants' concurrencies too high to bind, concurrencies of
// 5 (conc-tight), and the same with some tenants at them (conc-busy).
func BenchmarkClaimLimitedCost(b *testing.B) {
	for _, shape := range []storetest.LimitShape{storetest.OwnLimits, storetest.DefaultLimits, storetest.ConcLimits,
		storetest.ConcTightLimits, storetest.ConcBusyLimits} {
		for _, tenants := range []int{1, 100, 10000} {
			b.Run(fmt.Sprintf("limits=%s/tenants=%d", shape, tenants), func(b *testing.B) {
				storetest.BenchClaimLimitedCost(b, openTest(b, benchConfig()), openTest(b, benchConfig()), tenants, shape)
			})
		}
	}
}

// BenchmarkListRareFilter: one page of a list whose filter matches only a
// tenant's oldest job, over 100,000 newer jobs of that tenant
// (storetest.BenchListRareFilter).
func BenchmarkListRareFilter(b *testing.B) {
	for _, what := range []string{"kind", "queue", "since"} {
		b.Run(what, func(b *testing.B) {
			storetest.BenchListRareFilter(b, openTest(b, benchConfig()), 100000, what)
		})
	}
}

// BenchmarkClaimPromoting: claims of 100 and 1,000 that each promote as
// many due jobs and take them all (storetest.BenchClaimPromoting).
func BenchmarkClaimPromoting(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := openTest(b, benchConfig())
			reportJobs(b, s, storetest.BenchClaimPromoting(b, s, n))
		})
	}
}
