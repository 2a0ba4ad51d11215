package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// system is one job system under test, on its own fresh schema.
type system interface {
	// insertOne inserts job i (args {"n": i}; key "k<i>" when keys).
	insertOne(ctx context.Context, i int, keys bool) error
	// insertBatch inserts jobs [from, to) in one call.
	insertBatch(ctx context.Context, from, to int, keys bool) error
	// startWork starts working the bench queue; done is closed once the
	// handler has run target times.
	startWork(ctx context.Context, target int64, done chan<- struct{}) error
	// completedSQL counts the completed jobs of the schema.
	completedSQL() string
	// close stops the client and closes the pool (not the schema).
	close(ctx context.Context) error
}

// harness holds the admin connection and creates and drops schemas.
type harness struct {
	o         *options
	admin     *pgxpool.Pool
	progress  io.Writer
	pgVersion string
}

func newHarness(ctx context.Context, o *options, progress io.Writer) (*harness, error) {
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("parse url: %w", err)
	}
	cfg.MaxConns = 2
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	h := &harness{o: o, admin: admin, progress: progress}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := admin.QueryRow(pctx, "SHOW server_version").Scan(&h.pgVersion); err != nil {
		admin.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return h, nil
}

func (h *harness) close() { h.admin.Close() }

// newPool returns a pool of o.Conns connections, the same for both
// systems, whose backends are named app (application_name: startCPU finds
// them by it).
func (h *harness) newPool(ctx context.Context, app string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(h.o.URL)
	if err != nil {
		return nil, fmt.Errorf("parse url: %w", err)
	}
	cfg.MaxConns = int32(h.o.Conns)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	return pgxpool.NewWithConfig(ctx, cfg)
}

// schemaName returns a fresh schema name for sys.
func (h *harness) schemaName(sys string) string {
	return fmt.Sprintf("peer_%s_%d_%d", sys, os.Getpid(), schemaSeq.Add(1))
}

// schemaSeq numbers the schemas of this process: harnesses run in parallel
// in the tests.
var schemaSeq atomic.Int64

// dropSchema drops a schema and everything in it.
func (h *harness) dropSchema(schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Fprintf(h.progress, "peer: drop schema %s: %v\n", schema, err)
	}
}

// settle analyzes the tables of schema and checkpoints, so a measurement
// starts with fresh statistics and no dirty pages of the one before.
func (h *harness) settle(ctx context.Context, schema string) error {
	rows, err := h.admin.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	for _, t := range tables {
		if _, err := h.admin.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, t}.Sanitize()); err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
	}
	if _, err := h.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// setup describes the system a measurement needs.
type setup struct {
	work      bool // configure the bench queue and its worker
	riverFast bool // River batches use InsertManyFast (COPY)
	// cooldown is River's FetchCooldown (0 = River's default).
	cooldown time.Duration
}

// with creates a fresh schema and system, runs fn and tears both down.
func (h *harness) with(ctx context.Context, sys string, st setup, fn func(s system, schema string) error) (err error) {
	schema := h.schemaName(sys)
	defer h.dropSchema(schema)
	pool, err := h.newPool(ctx, schema)
	if err != nil {
		return err
	}
	var s system
	switch sys {
	case "idem":
		s, err = newIdem(ctx, pool, schema, h.o, st)
	case "river":
		s, err = newRiver(ctx, pool, schema, h.o, st)
	default:
		err = fmt.Errorf("unknown system %q", sys)
	}
	if err != nil {
		pool.Close()
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = errors.Join(err, s.close(cctx))
	}()
	return fn(s, schema)
}

// singleResult is the outcome of the single-insert measurement.
type singleResult struct {
	rate     float64
	p50, p99 time.Duration
	cpu      cpuUse
}

// measureSingle inserts SingleN jobs one at a time from Goroutines goroutines.
func (h *harness) measureSingle(ctx context.Context, sys string, keys bool) (res singleResult, err error) {
	err = h.with(ctx, sys, setup{}, func(s system, schema string) error {
		if err := h.settle(ctx, schema); err != nil {
			return err
		}
		n := h.o.SingleN
		var next atomic.Int64
		lats := make([][]time.Duration, h.o.Goroutines)
		errs := make([]error, h.o.Goroutines)
		var wg sync.WaitGroup
		stopProfile := h.profile(sys, "single", keys)
		meter := h.startCPU(ctx, schema)
		start := time.Now()
		for g := range h.o.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine := make([]time.Duration, 0, n/h.o.Goroutines+1)
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						break
					}
					t0 := time.Now()
					if err := s.insertOne(ctx, i, keys); err != nil {
						errs[g] = err
						return
					}
					mine = append(mine, time.Since(t0))
				}
				lats[g] = mine
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		cpu := meter.stop(ctx)
		stopProfile()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		all := slices.Concat(lats...)
		slices.Sort(all)
		res = singleResult{rate: float64(n) / elapsed.Seconds(),
			p50: all[len(all)*50/100], p99: all[min(len(all)-1, len(all)*99/100)], cpu: cpu}
		return nil
	})
	return res, err
}

// measureBatch inserts BatchN jobs in batches of BatchSize from one goroutine.
func (h *harness) measureBatch(ctx context.Context, sys string, keys, fast bool) (rate float64, cpu cpuUse, err error) {
	err = h.with(ctx, sys, setup{riverFast: fast}, func(s system, schema string) error {
		if err := h.settle(ctx, schema); err != nil {
			return err
		}
		stopProfile := h.profile(sys, "batch", keys)
		meter := h.startCPU(ctx, schema)
		start := time.Now()
		err := insertAll(ctx, s, h.o.BatchN, h.o.BatchSize, keys)
		rate = float64(h.o.BatchN) / time.Since(start).Seconds()
		cpu = meter.stop(ctx)
		stopProfile()
		if err != nil {
			return err
		}
		return nil
	})
	return rate, cpu, err
}

func insertAll(ctx context.Context, s system, n, size int, keys bool) error {
	for from := 0; from < n; from += size {
		if err := s.insertBatch(ctx, from, min(n, from+size), keys); err != nil {
			return err
		}
	}
	return nil
}

// measureWork inserts WorkN no-op jobs (not timed), then starts the client and
// times until the last completion is committed.
func (h *harness) measureWork(ctx context.Context, sys string, keys bool, cooldown time.Duration) (rate float64, cpu cpuUse, err error) {
	err = h.with(ctx, sys, setup{work: true, riverFast: true, cooldown: cooldown}, func(s system, schema string) error {
		n := h.o.WorkN
		if err := insertAll(ctx, s, n, h.o.BatchSize, keys); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		if err := h.settle(ctx, schema); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, h.o.Timeout)
		defer cancel()
		done := make(chan struct{})
		stopProfile := h.profile(sys, "work", keys)
		defer stopProfile()
		meter := h.startCPU(ctx, schema)
		start := time.Now()
		if err := s.startWork(wctx, int64(n), done); err != nil {
			return err
		}
		select {
		case <-done:
		case <-wctx.Done():
			return fmt.Errorf("work: %w", wctx.Err())
		}
		// Completions are batched by both systems: wait until the last one
		// is committed.
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var got int
			if err := h.admin.QueryRow(wctx, s.completedSQL()).Scan(&got); err != nil {
				return fmt.Errorf("count completed: %w", err)
			}
			if got >= n {
				break
			}
			select {
			case <-tick.C:
			case <-wctx.Done():
				return fmt.Errorf("wait for completions (%d of %d): %w", got, n, wctx.Err())
			}
		}
		rate = float64(n) / time.Since(start).Seconds()
		cpu = meter.stop(ctx)
		stopProfile()
		return nil
	})
	return rate, cpu, err
}

// scenario runs one scenario on both systems, idem first, and returns its rows.
func (h *harness) scenario(ctx context.Context, name string, keys bool) ([]row, error) {
	suffix := ""
	if keys {
		suffix = ", keys"
	}
	h.logf("%s%s …", name, suffix)
	switch name {
	case "single":
		var r [2]singleResult
		for i, sys := range []string{"idem", "river"} {
			var err error
			if r[i], err = h.measureSingle(ctx, sys, keys); err != nil {
				return nil, fmt.Errorf("%s: %w", sys, err)
			}
		}
		label := fmt.Sprintf("single insert, %d goroutines%s", h.o.Goroutines, suffix)
		target := 0.0
		if h.o.Table == "issue" {
			label, target = "PG "+label, 2.5
		}
		rows := []row{
			{name: label + " (jobs/s)", idem: r[0].rate, river: r[1].rate, unit: "jobs/s", target: target},
			{name: label + " p50", idem: ms(r[0].p50), river: ms(r[1].p50), unit: "ms"},
			{name: label + " p99", idem: ms(r[0].p99), river: ms(r[1].p99), unit: "ms"},
		}
		return append(rows, cpuRows(label, r[0].cpu, r[1].cpu, h.o.SingleN)...), nil
	case "batch":
		idemRate, idemCPU, err := h.measureBatch(ctx, "idem", keys, false)
		if err != nil {
			return nil, fmt.Errorf("idem: %w", err)
		}
		var many float64
		if h.o.Table == "full" {
			if many, _, err = h.measureBatch(ctx, "river", keys, false); err != nil {
				return nil, fmt.Errorf("river InsertMany: %w", err)
			}
		}
		fast, fastCPU, err := h.measureBatch(ctx, "river", keys, true)
		if err != nil {
			return nil, fmt.Errorf("river InsertManyFast: %w", err)
		}
		if h.o.Table == "issue" {
			label := fmt.Sprintf("PG batch of %s vs River COPY (InsertManyFast) (jobs/s)", count(h.o.BatchSize))
			if keys {
				label = fmt.Sprintf("PG batch of %s with keys vs River COPY unique (InsertManyFast, UniqueOpts ByArgs) (jobs/s)", count(h.o.BatchSize))
			}
			rows := []row{{name: label, idem: idemRate, river: fast, unit: "jobs/s", target: 1}}
			return append(rows, cpuRows(strings.TrimSuffix(label, " (jobs/s)"), idemCPU, fastCPU, h.o.BatchN)...), nil
		}
		label := fmt.Sprintf("batch insert %s in %s%s", count(h.o.BatchN), count(h.o.BatchSize), suffix)
		rows := []row{
			{name: label + " vs InsertMany (jobs/s)", idem: idemRate, river: many, unit: "jobs/s"},
			{name: label + " vs InsertManyFast/COPY (jobs/s)", idem: idemRate, river: fast, unit: "jobs/s"},
		}
		return append(rows, cpuRows(label+" vs InsertManyFast/COPY", idemCPU, fastCPU, h.o.BatchN)...), nil
	case "work":
		idemRate, idemCPU, err := h.measureWork(ctx, "idem", keys, 0)
		if err != nil {
			return nil, fmt.Errorf("idem: %w", err)
		}
		riverRate, riverCPU, err := h.measureWork(ctx, "river", keys, h.o.RiverFetchCooldown)
		if err != nil {
			return nil, fmt.Errorf("river: %w", err)
		}
		label := fmt.Sprintf("work %s no-op, %d workers%s", count(h.o.WorkN), h.o.Workers, suffix)
		cd := "River default 100ms"
		if h.o.RiverFetchCooldown > 0 {
			cd = h.o.RiverFetchCooldown.String()
		}
		if h.o.Table == "issue" {
			label = fmt.Sprintf("PG work %s no-op, %d workers", count(h.o.WorkN), h.o.Workers)
			if keys {
				label = fmt.Sprintf("PG work %s no-op with keys (River unique jobs), %d workers", count(h.o.WorkN), h.o.Workers)
			}
		}
		rows := []row{{name: fmt.Sprintf("%s, River FetchCooldown %s (jobs/s)", label, cd), idem: idemRate, river: riverRate, unit: "jobs/s", target: 1.5}}
		if h.o.Table == "full" {
			rows[0].target = 0
		}
		rows = append(rows, cpuRows(label, idemCPU, riverCPU, h.o.WorkN)...)
		if h.o.RiverDefaultRow && h.o.RiverFetchCooldown > 0 {
			def, _, err := h.measureWork(ctx, "river", keys, 0)
			if err != nil {
				return nil, fmt.Errorf("river default: %w", err)
			}
			rows = append(rows, row{name: label + ", River default FetchCooldown 100ms (jobs/s)", idem: idemRate, river: def, unit: "jobs/s"})
		}
		return rows, nil
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.progress, "peer: "+format+"\n", args...)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// count formats n with thousands separators.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// profile starts a CPU profile of this process for an idem measurement
// when --cpuprofile is set, and returns the function that stops it (safe
// to call twice). The profile shows idem's client side; PostgreSQL's own
// CPU is in its backends, not here.
func (h *harness) profile(sys, scenario string, keys bool) func() {
	if h.o.CPUProfile == "" || sys != "idem" {
		return func() {}
	}
	name := scenario
	if keys {
		name += "-keys"
	}
	path := filepath.Join(h.o.CPUProfile, name+".pprof")
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		h.logf("cpuprofile %s: %v", path, err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
			h.logf("cpuprofile: %s (go tool pprof -top %s)", path, path)
		})
	}
}
