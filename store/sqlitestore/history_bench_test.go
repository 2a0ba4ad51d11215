package sqlitestore

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The history harness runs only when asked for:
//
//	go test ./store/sqlitestore/ -run '^$' -bench HistoryRounds -history.rounds 10
var (
	historyRounds = flag.Int("history.rounds", 0, "rounds of BenchmarkHistoryRounds (0 skips it)")
	historyRound  = flag.Int("history.round", 100_000, "jobs per round of BenchmarkHistoryRounds")
)

// BenchmarkHistoryRounds pushes -history.round jobs per round through one
// database (enqueue in batches of 1,000, then claim 100 and finish them in
// one call until the queue is empty) and prints, per round, enqueue and
// work jobs/s, the mean claim time and the database's page count. SQLite
// removes a finished job's entry from the partial claim index in the same
// write, so only the history-wide indexes grow, by one B-tree level at most.
func BenchmarkHistoryRounds(b *testing.B) {
	if *historyRounds <= 0 {
		b.Skip("set -history.rounds to run")
	}
	s := openTest(b, benchConfig())
	ctx := context.Background()
	fmt.Printf("%5s %9s %9s %9s %9s %9s\n", "round", "history", "enq/s", "work/s", "claim-ms", "pages")
	for r := 1; r <= *historyRounds; r++ {
		enq := sqliteHistoryEnqueue(ctx, b, s, *historyRound)
		work, claim := sqliteHistoryWork(ctx, b, s)
		var pages int64
		if err := s.rdb.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%5d %9d %9.0f %9.0f %9.2f %9d\n", r, r*(*historyRound), enq, work,
			float64(claim.Microseconds())/1000, pages)
	}
}

// sqliteHistoryEnqueue inserts n jobs in batches of 1,000 and returns jobs/s.
func sqliteHistoryEnqueue(ctx context.Context, b *testing.B, s *Store, n int) float64 {
	start := time.Now()
	for done := 0; done < n; done += 1000 {
		batch := make([]*store.JobInsertParams, min(1000, n-done))
		for i := range batch {
			batch[i] = job("bench")
			batch[i].RunAt = time.Time{}
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: batch}); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// sqliteHistoryWork claims and finishes until the queue is empty; it
// returns jobs/s and the mean duration of a claim.
func sqliteHistoryWork(ctx context.Context, b *testing.B, s *Store) (float64, time.Duration) {
	start := time.Now()
	var total, claims int
	var claiming time.Duration
	for {
		now := time.Now()
		jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w",
			Limit: 100, LeaseUntil: now.Add(time.Minute), Now: now})
		claiming += time.Since(now)
		claims++
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 {
			break
		}
		fin := make([]*store.JobFinishParams, len(jobs))
		for i, j := range jobs {
			fin[i] = &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken,
				State: idemtype.StateCompleted, Outcome: idemtype.OutcomeCompleted,
				Result: []byte(`{}`), FinishedAt: now, DurationMS: 1}
		}
		if _, err := s.JobFinishMany(ctx, fin); err != nil {
			b.Fatal(err)
		}
		total += len(jobs)
	}
	return float64(total) / time.Since(start).Seconds(), claiming / time.Duration(claims)
}
