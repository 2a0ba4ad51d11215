package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// reportJobs reports jobs per second over the benchmark's timed section.
func reportJobs(b *testing.B, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
}

// reportGroups reports the mean number of requests per shared transaction.
func reportGroups(b *testing.B, s *Store) {
	if s.groups == nil {
		return
	}
	if n := s.groups.insertGroups.Load(); n > 0 {
		b.ReportMetric(float64(s.groups.insertReqs.Load())/float64(n), "ins-req/tx")
	}
	if n := s.groups.finishGroups.Load(); n > 0 {
		b.ReportMetric(float64(s.groups.finishReqs.Load())/float64(n), "fin-req/tx")
	}
}

func benchJob() *store.JobInsertParams {
	return &store.JobInsertParams{Tenant: "default", Queue: "default", Kind: "bench",
		Args: json.RawMessage(`{"n":1}`), MaxAttempts: 3, RunAt: time.Now()}
}

// groupModes are the group-commit settings compared by the benchmarks.
var groupModes = []struct {
	name    string
	workers int
}{{"off", -1}, {"w1", 1}, {"w2", 2}, {"w4", 4}}

// parallel16 runs fn from 16 goroutines.
func parallel16(b *testing.B, fn func() error) {
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := fn(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// Single-job inserts (one JobInsertMany each) from 16 goroutines.
func BenchmarkInsertSingle16(b *testing.B) {
	for _, m := range groupModes {
		b.Run(m.name, func(b *testing.B) {
			s := newTestStoreCfg(b, 20, &Config{GroupCommitWorkers: m.workers})
			parallel16(b, func() error {
				_, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{benchJob()}})
				return err
			})
			reportJobs(b, b.N)
			reportGroups(b, s)
		})
	}
}

// Single-job inserts with distinct idempotency keys from 16 goroutines.
func BenchmarkInsertSingleKeyed16(b *testing.B) {
	for _, m := range groupModes {
		b.Run(m.name, func(b *testing.B) {
			s := newTestStoreCfg(b, 20, &Config{GroupCommitWorkers: m.workers})
			var n atomic.Int64
			parallel16(b, func() error {
				p := benchJob()
				p.IdempotencyKey = "k" + strconv.FormatInt(n.Add(1), 10)
				p.Fingerprint, p.DedupWindow = "fp", time.Hour
				_, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}})
				return err
			})
			reportJobs(b, b.N)
			reportGroups(b, s)
		})
	}
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
	for _, m := range []struct {
		name    string
		workers int
	}{{"off", -1}, {"w2", 2}} {
		b.Run(m.name, func(b *testing.B) {
			s := newTestStoreCfg(b, 20, &Config{GroupCommitWorkers: m.workers})
			dup := func() *store.JobInsertParams {
				p := benchJob()
				p.IdempotencyKey, p.Fingerprint, p.DedupWindow = "dup", "fp", time.Hour
				return p
			}
			if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{dup()}}); err != nil {
				b.Fatal(err)
			}
			parallel16(b, func() error {
				res, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{dup()}})
				if err == nil && !res[0].Existing {
					b.Errorf("duplicate insert: %+v", res[0])
				}
				return err
			})
			reportJobs(b, b.N)
			reportGroups(b, s)
		})
	}
}

// fillJobs inserts n claimable jobs in batches of 5,000.
func fillJobs(b *testing.B, s *Store, n int) {
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

// Claim 100 jobs and complete them in one JobFinishMany, per iteration.
func BenchmarkClaimFinish100(b *testing.B) {
	s := newTestStore(b, 4)
	const per = 100
	fillJobs(b, s, per*50)
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
			fillJobs(b, s, per*50)
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

// 16 goroutines each claim 10 jobs and complete each with its own
// JobFinishMany call (the finishes share transactions under group commit).
func BenchmarkClaimFinishEach16(b *testing.B) {
	for _, m := range []struct {
		name    string
		workers int
	}{{"off", -1}, {"w2", 2}} {
		b.Run(m.name, func(b *testing.B) {
			s := newTestStoreCfg(b, 20, &Config{GroupCommitWorkers: m.workers})
			fillJobs(b, s, 200_000)
			var done atomic.Int64
			parallel16(b, func() error {
				jobs, err := s.JobClaim(b.Context(), &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w",
					Limit: 10, LeaseUntil: time.Now().Add(time.Minute)})
				if err != nil {
					return err
				}
				for _, j := range jobs {
					if _, err := s.JobFinishMany(b.Context(), []*store.JobFinishParams{complete(j)}); err != nil {
						return err
					}
				}
				done.Add(int64(len(jobs)))
				return nil
			})
			reportJobs(b, int(done.Load()))
			reportGroups(b, s)
		})
	}
}

// BenchmarkClaimTenants: claims of 10 with 1, 100 and 10,000 tenants
// holding work, without and with limits (storetest.BenchClaimTenants).
func BenchmarkClaimTenants(b *testing.B) {
	for _, tenants := range []int{1, 100, 10000} {
		for _, limits := range []bool{false, true} {
			b.Run(fmt.Sprintf("tenants=%d/limits=%v", tenants, limits), func(b *testing.B) {
				storetest.BenchClaimTenants(b, newTestStore(b, 4), tenants, limits)
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
				storetest.BenchClaimLimitedCost(b, newTestStore(b, 4), newTestStore(b, 4), tenants, shape)
			})
		}
	}
}

// BenchmarkClaimLimitedPaths: the limited claims of BenchmarkClaimTenants
// on each path, in one binary so that a run compares them on the same
// machine state: general (the three-round-trip transaction), one-round
// (qClaimOneLimited on every claim) and auto (what a store does).
func BenchmarkClaimLimitedPaths(b *testing.B) {
	for _, tenants := range []int{1, 100, 10000} {
		for _, m := range []struct {
			name string
			mode oneRoundMode
		}{{"general", oneRoundNever}, {"one-round", oneRoundAlways}, {"auto", oneRoundAuto}} {
			b.Run(fmt.Sprintf("tenants=%d/path=%s", tenants, m.name), func(b *testing.B) {
				s := newTestStore(b, 4)
				s.oneRoundMode = m.mode
				storetest.BenchClaimTenants(b, s, tenants, true)
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
			storetest.BenchListRareFilter(b, newTestStore(b, 4), 100000, what)
		})
	}
}

// BenchmarkClaimFinish100Keyed: the store's share of keyed work, per
// iteration: claim 100 keyed jobs, acquire the keys the claim did not
// report held (the executor's AcquireKeys), complete the 100 with their
// results stored in their records. held: trust the claim's KeyHeld (what
// the executor does); ignore: acquire every key, as before claims read
// them (BENCHMARKS.md, tenth session).
func BenchmarkClaimFinish100Keyed(b *testing.B) {
	sum := sha256.Sum256([]byte(`{}`))
	emptyObjectHash := hex.EncodeToString(sum[:])
	for _, mode := range []string{"held", "ignore"} {
		b.Run(mode, func(b *testing.B) {
			s := newTestStore(b, 4)
			const per = 100
			n := 0
			fill := func() {
				batch := make([]*store.JobInsertParams, per*50)
				for i := range batch {
					n++
					batch[i] = benchJob()
					batch[i].RunAt = time.Now().Add(-time.Second)
					batch[i].IdempotencyKey, batch[i].Fingerprint = fmt.Sprintf("key-%09d", n), "fp"
					batch[i].DedupWindow, batch[i].ResultTTL = time.Hour, time.Hour
				}
				if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: batch}); err != nil {
					b.Fatal(err)
				}
			}
			fill()
			claimed, held := 0, 0
			b.ResetTimer()
			for b.Loop() {
				now := time.Now()
				jobs, err := s.JobClaim(b.Context(), &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w",
					Limit: per, LeaseUntil: now.Add(time.Minute), Now: now})
				if err != nil {
					b.Fatal(err)
				}
				if len(jobs) < per {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
				var ps []*store.RecordAcquireParams
				for _, j := range jobs {
					if j.KeyHeld && mode == "held" {
						held++
						continue
					}
					ps = append(ps, &store.RecordAcquireParams{Tenant: j.Tenant, Key: j.IdempotencyKey,
						Owner: store.JobOwner(j.ID), JobID: j.ID, LeaseUntil: *j.LeaseExpiresAt, DedupUntil: now,
						ExpiresAt: now.Add(time.Hour), Now: now})
				}
				if len(ps) > 0 {
					res, err := s.RecordAcquireMany(b.Context(), ps)
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						if !r.Acquired {
							b.Fatalf("key not acquired: %+v", r.Record)
						}
					}
				}
				fin := make([]*store.JobFinishParams, len(jobs))
				for i, j := range jobs {
					fin[i] = complete(j)
					// What the executor sends: the result JSON, hashed.
					fin[i].RecordResult, fin[i].ResultHash = []byte(`{}`), emptyObjectHash
				}
				if len(fin) > 0 {
					if _, err := s.JobFinishMany(b.Context(), fin); err != nil {
						b.Fatal(err)
					}
				}
				claimed += len(jobs)
			}
			reportJobs(b, claimed)
			if mode == "held" && held < claimed*9/10 {
				b.Fatalf("%d of %d claimed jobs held their keys", held, claimed)
			}
		})
	}
}

// BenchmarkClaimPromoting: claims of 100 and 1,000 that each promote as
// many due jobs and take them all (storetest.BenchClaimPromoting).
func BenchmarkClaimPromoting(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(itoa(n), func(b *testing.B) {
			reportJobs(b, storetest.BenchClaimPromoting(b, newTestStore(b, 4), n))
		})
	}
}
