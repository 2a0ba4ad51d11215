// Command backlog measures what a backlog of jobs waiting for a later
// run_at (scheduled for tomorrow, or retrying with a long backoff) costs
// the claims of their queue: the latency of an empty claim (nothing due)
// and the rate at which a client of 100 workers works due jobs enqueued
// into the same queue, with --future such jobs pre-filled. It uses idem's
// public API only, so the same source builds against an older tree for a
// before/after comparison (BENCHMARKS.md, twenty-seventh session).
//
//	cd bench && go run ./cmd/backlog -future 1000000            # PostgreSQL
//	cd bench && go run ./cmd/backlog -future 1000000 -sqlite    # SQLite (temp file)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
	"github.com/jackc/pgx/v5"
)

func main() {
	future := flag.Int("future", 100000, "jobs scheduled a day ahead in the measured queue")
	tenants := flag.Int("tenants", 1, "tenants the scheduled jobs are spread over")
	work := flag.Int("work", 10000, "due jobs worked after the empty claims")
	polls := flag.Int("polls", 50, "empty claims measured")
	useSQLite := flag.Bool("sqlite", false, "a temp SQLite file instead of PostgreSQL")
	dbURL := flag.String("database", os.Getenv("IDEM_TEST_DATABASE_URL"), "PostgreSQL URL (a fresh schema is made and dropped)")
	flag.Parse()
	if err := run(context.Background(), *future, *tenants, *work, *polls, *useSQLite, *dbURL); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, future, tenants, work, polls int, useSQLite bool, dbURL string) error {
	if tenants < 1 || future < 0 || work < 1 || polls < 1 {
		return fmt.Errorf("-tenants, -work and -polls must be positive, -future not negative")
	}
	var (
		st     store.Store
		vacuum func() error
	)
	if useSQLite {
		dir, err := os.MkdirTemp("", "idem-backlog")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if st, err = sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil); err != nil {
			return err
		}
		vacuum = func() error { return nil }
	} else {
		if dbURL == "" {
			dbURL = "postgres://postgres@127.0.0.1:5432/test"
		}
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		schema := fmt.Sprintf("idem_backlog_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
		defer conn.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		if st, err = pgstore.Open(ctx, dbURL, &pgstore.Config{Schema: schema}); err != nil {
			return err
		}
		vacuum = func() error { _, err := conn.Exec(ctx, "VACUUM ANALYZE "+schema+".jobs"); return err }
	}
	defer st.Close()
	quiet := slog.New(slog.DiscardHandler)
	c, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: quiet})
	if err != nil {
		return err
	}
	t0 := time.Now()
	batch := make([]idem.EnqueueParams, 0, 1000)
	for i := range future {
		batch = append(batch, idem.EnqueueParams{Kind: "later", Opts: &idem.EnqueueOpts{Tenant: fmt.Sprint("t", i%tenants),
			RunAt: time.Now().Add(24*time.Hour + time.Duration(i)*time.Millisecond)}})
		if len(batch) == cap(batch) || i == future-1 {
			if _, err := c.EnqueueMany(ctx, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := vacuum(); err != nil {
		return err
	}
	fmt.Printf("store=%s future=%d tenants=%d: pre-filled in %.1f s\n", storeName(useSQLite), future, tenants, time.Since(t0).Seconds())
	lat := make([]time.Duration, 0, polls)
	for range polls {
		now := time.Now()
		got, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "w", Limit: 10,
			LeaseUntil: now.Add(time.Minute), Now: now})
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("claimed %d jobs not yet due", len(got))
		}
		lat = append(lat, time.Since(now))
	}
	slices.Sort(lat)
	fmt.Printf("  empty claim p50 %v p90 %v\n", lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*9/10].Round(time.Microsecond))
	var done atomic.Int64
	ws := idem.NewWorkers()
	ws.Handle("due", func(context.Context, *idem.JobRow) (json.RawMessage, error) { done.Add(1); return nil, nil })
	for i := 0; i < work; i += 1000 {
		items := make([]idem.EnqueueParams, min(1000, work-i))
		for j := range items {
			items[j] = idem.EnqueueParams{Kind: "due"}
		}
		if _, err := c.EnqueueMany(ctx, items); err != nil {
			return err
		}
	}
	w, err := idem.NewClient(st, &idem.Config{Workers: ws, Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 100}},
		DisableMaintenance: true, Logger: quiet})
	if err != nil {
		return err
	}
	t0 = time.Now()
	if err := w.Start(ctx); err != nil {
		return err
	}
	for done.Load() < int64(work) {
		time.Sleep(5 * time.Millisecond)
	}
	el := time.Since(t0)
	if err := w.Stop(ctx); err != nil {
		return err
	}
	fmt.Printf("  work %d due jobs, 100 workers: %.0f jobs/s\n", work, float64(work)/el.Seconds())
	return nil
}

func storeName(useSQLite bool) string {
	if useSQLite {
		return "sqlite"
	}
	return "postgres"
}
