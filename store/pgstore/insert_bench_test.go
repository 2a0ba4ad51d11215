package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/store"
)

// The insert paths of JobInsertMany, each forced on the same batches, so
// that every path shows what it buys over the simpler one (BENCHMARKS.md,
// "Insert strategies"). Keyless batches: COPY (insertCopy, what a batch of
// copyMinItems or more takes), the multi-row insert (insertSimple, below
// it) and the general keyed path (insertOwn: qInsertFast in an explicit
// transaction). Keyed batches: one explicit transaction for the batch
// (insertOwn, what every keyed batch takes) and one transaction per job. A
// third keyed path, a one-shot implicit transaction for one-key requests,
// was measured here and removed (BENCHMARKS.md).

// insertStrategy inserts one batch's items by one path.
type insertStrategy struct {
	name string
	run  func(ctx context.Context, s *Store, items []*insertItem) ([]store.JobInsertResult, error)
}

// onConn runs fn on a pooled connection (the paths that take one).
func onConn(ctx context.Context, s *Store, fn func(c *pgxpool.Conn) ([]store.JobInsertResult, error)) ([]store.JobInsertResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return fn(conn)
}

var keylessStrategies = []insertStrategy{
	{"copy", func(ctx context.Context, s *Store, items []*insertItem) ([]store.JobInsertResult, error) {
		return s.insertCopy(ctx, items)
	}},
	{"rows", func(ctx context.Context, s *Store, items []*insertItem) ([]store.JobInsertResult, error) {
		return s.insertSimple(ctx, items)
	}},
	{"general", func(ctx context.Context, s *Store, items []*insertItem) ([]store.JobInsertResult, error) {
		return onConn(ctx, s, func(c *pgxpool.Conn) ([]store.JobInsertResult, error) {
			return s.insertOwn(ctx, c, items)
		})
	}},
}

var keyedStrategies = []insertStrategy{
	{"copy", func(ctx context.Context, s *Store, items []*insertItem) ([]store.JobInsertResult, error) {
		return onConn(ctx, s, func(c *pgxpool.Conn) ([]store.JobInsertResult, error) {
			return s.insertKeyedCopy(ctx, c, items)
		})
	}},
	{"own", func(ctx context.Context, s *Store, items []*insertItem) ([]store.JobInsertResult, error) {
		return onConn(ctx, s, func(c *pgxpool.Conn) ([]store.JobInsertResult, error) {
			return s.insertOwn(ctx, c, items)
		})
	}},
	{"perjob", func(ctx context.Context, s *Store, items []*insertItem) ([]store.JobInsertResult, error) {
		return onConn(ctx, s, func(c *pgxpool.Conn) ([]store.JobInsertResult, error) {
			out := make([]store.JobInsertResult, 0, len(items))
			for _, it := range items {
				r, err := s.insertOwn(ctx, c, []*insertItem{it})
				if err != nil {
					return nil, err
				}
				out = append(out, r...)
			}
			return out, nil
		})
	}},
}

// benchStrategy inserts batches of n jobs (keyed: each with a new key) by
// strat, checking that every job is created, and reports jobs per second.
func benchStrategy(b *testing.B, strat insertStrategy, n int, keyed bool) {
	s := newTestStore(b, 4)
	var seq atomic.Int64
	batch := func() []*insertItem {
		p := &store.JobInsertManyParams{Jobs: make([]*store.JobInsertParams, n)}
		for i := range p.Jobs {
			p.Jobs[i] = benchJob()
			if keyed {
				p.Jobs[i].IdempotencyKey = "k" + strconv.FormatInt(seq.Add(1), 10)
				p.Jobs[i].Fingerprint, p.Jobs[i].DedupWindow = "fp", time.Hour
			}
		}
		return newItems(p)
	}
	for b.Loop() {
		b.StopTimer()
		items := batch()
		b.StartTimer()
		res, err := strat.run(b.Context(), s, items)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != n || res[0].Job == nil || res[0].Existing || res[n-1].Job == nil || res[n-1].Existing {
			b.Fatalf("%s: %d results, first %+v", strat.name, len(res), res[0])
		}
	}
	reportJobs(b, b.N*n)
}

// BenchmarkInsertStrategyKeyless: keyless batches of 1, 10, 100, 1,000 and 10,000
// jobs by COPY, the multi-row insert and the general path.
func BenchmarkInsertStrategyKeyless(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000, 10000} {
		for _, st := range keylessStrategies {
			b.Run(fmt.Sprintf("n=%d/path=%s", n, st.name), func(b *testing.B) { benchStrategy(b, st, n, false) })
		}
	}
}

// BenchmarkInsertStrategyKeyed: batches of 1, 10, 100 and 1,000 keyed
// jobs in one transaction; one transaction per job at 10 and 100 (at 1,000
// one operation takes seconds).
func BenchmarkInsertStrategyKeyed(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		for _, st := range keyedStrategies {
			if st.name == "perjob" && (n == 1 || n == 1000) || st.name == "copy" && n < copyMinItems {
				continue // n=1 is "own"; n=1000 takes seconds an operation; COPY from copyMinItems
			}
			b.Run(fmt.Sprintf("n=%d/path=%s", n, st.name), func(b *testing.B) { benchStrategy(b, st, n, true) })
		}
	}
}
