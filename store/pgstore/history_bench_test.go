package pgstore

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// The history harness runs only when asked for:
//
//	go test ./store/pgstore/ -run '^$' -bench HistoryRounds -history.rounds 10
//
// -history.round sets the jobs per round (default 100,000).
var (
	historyRounds = flag.Int("history.rounds", 0, "rounds of BenchmarkHistoryRounds (0 skips it)")
	historyRound  = flag.Int("history.round", 100_000, "jobs per round of BenchmarkHistoryRounds")
	historyPlan   = flag.Bool("history.plan", false, "log EXPLAIN (ANALYZE, BUFFERS) of a claim per round")
)

// historyWorkers is the number of goroutines claiming and finishing.
const historyWorkers = 4

// BenchmarkHistoryRounds pushes -history.round jobs per round through one
// fresh schema (enqueue in batches of 1,000, then claim 100 and finish them
// in one call from 4 goroutines until the queue is empty) and prints, per
// round, enqueue and work jobs/s, live and dead tuples, the size of the
// jobs table and its main indexes and the number of vacuums so far (vac).
// Work must not slow down as the finished history grows.
func BenchmarkHistoryRounds(b *testing.B) {
	if *historyRounds <= 0 {
		b.Skip("set -history.rounds to run")
	}
	s := newTestStoreCfg(b, 8, &Config{GroupCommitWorkers: -1})
	ctx := b.Context()
	fmt.Printf("%5s %9s %9s %9s %9s %9s %8s %8s %8s %8s %8s %4s\n", "round", "history", "enq/s", "work/s",
		"live", "dead", "heapMB", "claimMB", "leaseMB", "pkeyMB", "finMB", "vac")

	for r := 1; r <= *historyRounds; r++ {
		enq := historyEnqueue(ctx, b, s, *historyRound)
		if *historyPlan {
			historyExplain(ctx, b, s, r)
		}
		work := historyWork(ctx, b, s)
		// Benchmark harness only: the workers' backends flush their table
		// statistics at most once a second and nothing signals it, so wait
		// that long before reading pg_stat_user_tables.
		time.Sleep(700 * time.Millisecond)
		fmt.Println(historyStats(ctx, b, s, r, r*(*historyRound), enq, work))
	}
}

// historyEnqueue inserts n keyless jobs in batches of 1,000 and returns jobs/s.
func historyEnqueue(ctx context.Context, b *testing.B, s *Store, n int) float64 {
	start := time.Now()
	for done := 0; done < n; done += 1000 {
		batch := make([]*store.JobInsertParams, min(1000, n-done))
		for i := range batch {
			batch[i] = benchJob()
			batch[i].RunAt = time.Now().Add(-time.Second)
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: batch}); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// historyWork claims and finishes jobs from historyWorkers goroutines until
// the queue is empty and returns jobs/s.
func historyWork(ctx context.Context, b *testing.B, s *Store) float64 {
	start := time.Now()
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	for range historyWorkers {
		wg.Go(func() {
			for {
				jobs, err := s.JobClaim(ctx, claimParams(100))
				if err != nil {
					b.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				fin := make([]*store.JobFinishParams, len(jobs))
				for i, j := range jobs {
					fin[i] = complete(j)
				}
				if _, err := s.JobFinishMany(ctx, fin); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				total += len(jobs)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// historyStats formats one round's line: throughput, tuples and sizes.
func historyStats(ctx context.Context, b *testing.B, s *Store, r, hist int, enq, work float64) string {
	var live, dead, avCount int64
	var heap, claim, lease, pkey, fin int64
	err := s.pool.QueryRow(ctx, s.sql(`SELECT n_live_tup, n_dead_tup, vacuum_count + autovacuum_count,
		pg_relation_size('{schema}.jobs'), pg_relation_size('{schema}.jobs_claim_tenant_idx'),
		pg_relation_size('{schema}.jobs_lease_idx'), pg_relation_size('{schema}.jobs_pkey'),
		pg_relation_size('{schema}.jobs_finished_idx')
		FROM pg_stat_user_tables WHERE relid = '{schema}.jobs'::regclass`)).
		Scan(&live, &dead, &avCount, &heap, &claim, &lease, &pkey, &fin)
	if err != nil {
		b.Fatal(err)
	}
	mb := func(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }
	return fmt.Sprintf("%5d %9d %9.0f %9.0f %9d %9d %8s %8s %8s %8s %8s %4d", r, hist, enq, work,
		live, dead, mb(heap), mb(claim), mb(lease), mb(pkey), mb(fin), avCount)
}

// historyExplain logs the plan of one claim of 100 (the fair claim's
// statement for the harness's tenant), rolled back.
func historyExplain(ctx context.Context, b *testing.B, s *Store, r int) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	p := claimParams(100)
	// The fair claim's per-tenant statement (one tenant: the harness's).
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+s.sql(qClaimFair),
		p.Queues[0], []string{benchJob().Tenant}, []int{100}, time.Now(), []string(nil), p.LeaseUntil, p.WorkerID)
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			b.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("round %d claim plan:\n%s\n", r, strings.Join(lines, "\n"))
}
