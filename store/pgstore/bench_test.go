package pgstore

import (
	"encoding/json"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// reportJobs reports jobs per second over the benchmark's timed section.
func reportJobs(b *testing.B, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
}

func benchJob() *store.JobInsertParams {
	return &store.JobInsertParams{Tenant: "default", Queue: "default", Kind: "bench",
		Args: json.RawMessage(`{"n":1}`), MaxAttempts: 3, RunAt: time.Now()}
}

// Single-job inserts (one transaction each) from 16 goroutines.
func BenchmarkInsertSingle16(b *testing.B) {
	s := newTestStore(b, 20)
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{benchJob()}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportJobs(b, b.N)
}

// Batches of 1,000 keyless jobs (one multi-row statement).
func BenchmarkInsertBatch1000(b *testing.B) {
	s := newTestStore(b, 4)
	batch := make([]*store.JobInsertParams, 1000)
	for i := range batch {
		batch[i] = benchJob()
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: batch}); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N*1000)
}

// Batches of 1,000 jobs with distinct idempotency keys.
func BenchmarkInsertBatch1000Keyed(b *testing.B) {
	s := newTestStore(b, 4)
	var n atomic.Int64
	b.ResetTimer()
	for b.Loop() {
		batch := make([]*store.JobInsertParams, 1000)
		for i := range batch {
			batch[i] = benchJob()
			batch[i].IdempotencyKey = "k" + strconv.FormatInt(n.Add(1), 10)
			batch[i].Fingerprint, batch[i].DedupWindow = "fp", time.Hour
		}
		if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: batch}); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N*1000)
}

// Repeats of one idempotency key (the existing-job path) from 16 goroutines.
func BenchmarkInsertDuplicateKey(b *testing.B) {
	s := newTestStore(b, 20)
	dup := func() *store.JobInsertParams {
		p := benchJob()
		p.IdempotencyKey, p.Fingerprint, p.DedupWindow = "dup", "fp", time.Hour
		return p
	}
	if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{dup()}}); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{dup()}})
			if err != nil || !res[0].Existing {
				b.Errorf("duplicate insert: %v %+v", err, res)
				return
			}
		}
	})
	reportJobs(b, b.N)
}

// Claim 100 jobs and complete them in one JobFinishMany, per iteration.
func BenchmarkClaimFinish100(b *testing.B) {
	s := newTestStore(b, 4)
	const per = 100
	fill := func(n int) {
		for n > 0 {
			k := min(n, 5000)
			batch := make([]*store.JobInsertParams, k)
			for i := range batch {
				batch[i] = benchJob()
				batch[i].RunAt = time.Now().Add(-time.Second)
			}
			if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: batch}); err != nil {
				b.Fatal(err)
			}
			n -= k
		}
	}
	fill(per * 50)
	claimed := 0
	b.ResetTimer()
	for b.Loop() {
		jobs, err := s.JobClaim(b.Context(), &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w",
			Limit: per, LeaseUntil: time.Now().Add(time.Minute)})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) < per {
			b.StopTimer()
			fill(per * 50)
			b.StartTimer()
		}
		fin := make([]*store.JobFinishParams, len(jobs))
		for i, j := range jobs {
			fin[i] = complete(j)
		}
		if len(fin) > 0 {
			if _, err := s.JobFinishMany(b.Context(), fin); err != nil {
				b.Fatal(err)
			}
		}
		claimed += len(jobs)
	}
	reportJobs(b, claimed)
}
