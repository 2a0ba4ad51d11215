// Command recordwrites counts the row writes a keyed job costs on
// PostgreSQL, by table, over its insert and over its work (claim, key
// acquire, handler, finish): a load-independent figure beside jobs/s.
//
//	cd bench && go run ./cmd/recordwrites -n 10000
//
// It enqueues -n keyed no-op jobs in batches of 1,000 on a fresh schema,
// works them with -workers workers, and reads pg_stat_user_tables after
// each phase (every connection of the phase closed, so its backend has
// flushed its counters). The schema is dropped at the end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
)

func main() {
	url := flag.String("url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	n := flag.Int("n", 10000, "keyed jobs")
	workers := flag.Int("workers", 100, "workers")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *url, *n, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "recordwrites:", err)
		os.Exit(1)
	}
}

// counts are a table's cumulative row counters.
type counts struct{ ins, upd, hot, del int64 }

func (c counts) minus(o counts) counts {
	return counts{c.ins - o.ins, c.upd - o.upd, c.hot - o.hot, c.del - o.del}
}

func run(ctx context.Context, out io.Writer, url string, n, workers int) error {
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	schema := "recordwrites_" + strconv.Itoa(os.Getpid())
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") }()
	before := map[string]counts{}
	if err := phase(ctx, url, schema, func(c *idem.Client) error { return enqueue(ctx, c, n) }, nil, 0); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	afterInsert, err := settled(ctx, admin, schema)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := phase(ctx, url, schema, nil, &n, workers); err != nil {
		return fmt.Errorf("work: %w", err)
	}
	took := time.Since(start)
	afterWork, err := settled(ctx, admin, schema)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d keyed jobs, %d workers, work %.1fs\n", n, workers, took.Seconds())
	fmt.Fprintf(out, "%-8s %-7s %10s %10s %10s %10s\n", "table", "phase", "ins/job", "upd/job", "hot/job", "del/job")
	for _, t := range []string{"records", "jobs"} {
		for _, ph := range []struct {
			name string
			c    counts
		}{{"insert", afterInsert[t].minus(before[t])}, {"work", afterWork[t].minus(afterInsert[t])}} {
			f := func(v int64) string { return strconv.FormatFloat(float64(v)/float64(n), 'f', 3, 64) }
			fmt.Fprintf(out, "%-8s %-7s %10s %10s %10s %10s\n", t, ph.name, f(ph.c.ins), f(ph.c.upd), f(ph.c.hot), f(ph.c.del))
		}
	}
	return nil
}

// phase opens a pool and a client on schema, runs fn (insert) or works
// *target jobs with workers, and closes everything.
func phase(ctx context.Context, url, schema string, fn func(*idem.Client) error, target *int, workers int) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, Logger: quiet})
	if err != nil {
		return err
	}
	defer st.Close()
	cfg := &idem.Config{Logger: quiet}
	done := make(chan struct{})
	if target != nil {
		var handled atomic.Int64
		w := idem.NewWorkers()
		w.Handle("noop", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			if handled.Add(1) == int64(*target) {
				close(done)
			}
			return nil, nil
		})
		cfg.Workers = w
		cfg.Queues = map[string]idem.QueueConfig{"bench": {MaxWorkers: workers}}
	}
	c, err := idem.NewClient(st, cfg)
	if err != nil {
		return err
	}
	if fn != nil {
		return fn(c)
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		return errors.New("work timed out")
	}
	// Wait until every finish is committed (the handler returns first).
	for {
		var left int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".jobs WHERE state <> 'completed'").Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a tool's own run, not a test
	}
	return c.Stop(ctx)
}

// enqueue inserts n keyed no-op jobs in batches of 1,000.
func enqueue(ctx context.Context, c *idem.Client, n int) error {
	for from := 0; from < n; from += 1000 {
		var items []idem.EnqueueParams
		for i := from; i < min(from+1000, n); i++ {
			items = append(items, idem.EnqueueParams{Kind: "noop", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
				Opts: &idem.EnqueueOpts{Queue: "bench", IdempotencyKey: "k" + strconv.Itoa(i)}})
		}
		res, err := c.EnqueueMany(ctx, items)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
	}
	return nil
}

// settled reads the counters of schema's tables once the closed
// connections' backends have flushed them (two equal readings in a row).
func settled(ctx context.Context, admin *pgx.Conn, schema string) (map[string]counts, error) {
	var last map[string]counts
	for range 100 {
		time.Sleep(200 * time.Millisecond) // backends flush their counters as they exit
		got, err := read(ctx, admin, schema)
		if err != nil {
			return nil, err
		}
		if last != nil && fmt.Sprint(last) == fmt.Sprint(got) {
			return got, nil
		}
		last = got
	}
	return last, nil
}

func read(ctx context.Context, admin *pgx.Conn, schema string) (map[string]counts, error) {
	if _, err := admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return nil, err
	}
	rows, err := admin.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
FROM pg_stat_user_tables WHERE schemaname = $1`, schema)
	if err != nil {
		return nil, err
	}
	out := map[string]counts{}
	var name string
	var c counts
	_, err = pgx.ForEachRow(rows, []any{&name, &c.ins, &c.upd, &c.hot, &c.del}, func() error {
		out[name] = c
		return nil
	})
	return out, err
}
