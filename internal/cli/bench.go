package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
)

// benchFlags are the inputs of `idem bench`.
type benchFlags struct {
	db         string
	jobs       int
	workers    int
	singles    int
	goroutines int
	dups       int
	profile    string
	schema     string
	keep       bool
	timeout    time.Duration
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure end-to-end throughput: enqueue, dedup and work no-op jobs",
		Long: `Enqueues --jobs no-op jobs in batches of 1,000, --singles more one at a time
from --goroutines goroutines, repeats one idempotency key --dups times, then works
every job with --workers workers and reports jobs/s and wait/run latency
percentiles. Without --database it uses a fresh SQLite file in a temp directory.

On PostgreSQL it uses a fresh schema idem_bench_<pid>_<n>, created at the
start and dropped at the end unless --keep. A schema named by --schema, else
by the URL's search_path (?search_path=s or ?options=-csearch_path=s), else
by IDEM_PG_SCHEMA, is used instead: created if missing (and then dropped
unless --keep), kept if it existed. A database or schema that already holds
jobs is refused: old jobs, keys and latencies would mix with the
measurement. --timeout bounds the whole run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := &benchReport{w: cmd.OutOrStdout(), asJSON: wantJSON(cmd)}
			if err := runBench(cmd.Context(), rep, &f); err != nil {
				return err
			}
			return rep.flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.db, "database", "", "database URL (default: a temp SQLite file)")
	fl.IntVar(&f.jobs, "jobs", 100000, "jobs enqueued in batches of 1,000")
	fl.IntVar(&f.singles, "singles", 20000, "jobs enqueued one at a time")
	fl.IntVar(&f.goroutines, "goroutines", 16, "goroutines for single enqueues")
	fl.IntVar(&f.dups, "dups", 10000, "enqueues of one repeated idempotency key")
	fl.IntVar(&f.workers, "workers", 100, "workers")
	fl.StringVar(&f.profile, "profile", "", "write a CPU profile of each phase (batch, single, dups, work) into this directory")
	fl.StringVar(&f.schema, "schema", "", "PostgreSQL schema (default: the URL's search_path, else IDEM_PG_SCHEMA, else a fresh one)")
	fl.BoolVar(&f.keep, "keep", false, "keep the schema or temp SQLite file bench created")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "limit of the whole run")
	return cmd
}

func runBench(ctx context.Context, rep *benchReport, f *benchFlags) (err error) {
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	db, url, err := openBenchDB(ctx, f.db, f.schema, f.keep)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.close(ctx, url)) }()
	workers := idem.NewWorkers()
	var ran atomic.Int64
	workers.Handle("noop", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		ran.Add(1)
		return nil, nil
	})
	client, err := idem.NewClient(db.st, &idem.Config{Workers: workers, Queues: map[string]idem.QueueConfig{
		"bench": {MaxWorkers: f.workers}}, FetchLimit: max(f.workers, 1)})
	if err != nil {
		return err
	}
	if err := refuseUsed(ctx, client, db, url); err != nil {
		return err
	}
	rep.Store, rep.Schema = storeName(url), db.schema
	where := ""
	switch {
	case db.schema != "" && db.drop:
		where = "  schema=" + db.schema + " (dropped at the end)"
	case db.schema != "":
		where = "  schema=" + db.schema + " (kept)"
	case f.keep || f.db != "":
		where = "  file=" + sqlitePath(url)
	}
	rep.text("idem bench  store=%s%s  jobs=%d singles=%d goroutines=%d workers=%d\n", rep.Store, where, f.jobs, f.singles, f.goroutines, f.workers)
	opts := &idem.EnqueueOpts{Queue: "bench"}
	created := 0
	counted := func(run func() (int, error)) func() error {
		return func() error {
			n, err := run()
			created += n
			return err
		}
	}
	phases := []struct {
		name string
		run  func() error
	}{
		{"batch", counted(func() (int, error) { return benchBatch(ctx, rep, client, f.jobs, opts) })},
		{"single", counted(func() (int, error) { return benchSingles(ctx, rep, client, f, opts) })},
		{"dups", counted(func() (int, error) { return benchDups(ctx, rep, client, f.dups, opts) })},
		{"work", func() error { return benchWork(ctx, rep, client, &ran, created) }},
	}
	for _, p := range phases {
		rep.cpuStart = processCPU()
		if err := profiled(f.profile, p.name, p.run); err != nil {
			return err
		}
	}
	return nil
}

// profiled runs one bench phase, writing its CPU profile to dir/name.pprof
// when dir is set.
func profiled(dir, name string, run func() error) error {
	if dir == "" {
		return run()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("profile dir: %w", err)
	}
	out, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer pprof.StopCPUProfile()
	return run()
}

func storeName(url string) string {
	if isPostgres(url) {
		return "postgres"
	}
	return "sqlite"
}

// benchBatch enqueues n jobs in batches and returns how many it created.
func benchBatch(ctx context.Context, rep *benchReport, c *idem.Client, n int, opts *idem.EnqueueOpts) (int, error) {
	created := 0
	start := time.Now()
	for done := 0; done < n; done += idem.MaxBatch {
		items := make([]idem.EnqueueParams, min(idem.MaxBatch, n-done))
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "noop", Opts: opts}
		}
		res, err := c.EnqueueMany(ctx, items)
		if err != nil {
			return 0, fmt.Errorf("batch enqueue: %w", err)
		}
		for _, r := range res {
			if r.Err != nil {
				return 0, fmt.Errorf("batch enqueue: %w", r.Err)
			}
			if !r.Existing {
				created++
			}
		}
	}
	rep.add("enqueue batch of 1000", n, time.Since(start), nil)
	return created, nil
}

// benchSingles enqueues f.singles jobs one at a time and returns how many
// it created.
func benchSingles(ctx context.Context, rep *benchReport, c *idem.Client, f *benchFlags, opts *idem.EnqueueOpts) (int, error) {
	var created atomic.Int64
	lat := make([][]time.Duration, f.goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, f.goroutines)
	start := time.Now()
	for g := range f.goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < f.singles; i += f.goroutines {
				t := time.Now()
				res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "noop", Opts: opts})
				if err != nil {
					errs <- err
					return
				}
				if !res.Existing {
					created.Add(1)
				}
				lat[g] = append(lat[g], time.Since(t))
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("single enqueue: %w", err)
	}
	rep.add(fmt.Sprintf("enqueue single x%d goroutines", f.goroutines), f.singles, time.Since(start), slices.Concat(lat...))
	return int(created.Load()), nil
}

// benchDups enqueues one key n times and returns how many jobs that created
// (one, or none when the key was known).
func benchDups(ctx context.Context, rep *benchReport, c *idem.Client, n int, opts *idem.EnqueueOpts) (int, error) {
	if n == 0 {
		return 0, nil
	}
	created := 0
	o := *opts
	o.IdempotencyKey = "bench-dup-key"
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for range n {
		t := time.Now()
		res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "noop", Opts: &o})
		if err != nil {
			return 0, fmt.Errorf("duplicate enqueue: %w", err)
		}
		if !res.Existing {
			created++
		}
		lat = append(lat, time.Since(t))
	}
	rep.add("enqueue duplicate key", n, time.Since(start), lat)
	return created, nil
}

func benchWork(ctx context.Context, rep *benchReport, c *idem.Client, ran *atomic.Int64, total int) error {
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return err
	}
	// Watch a counter, not the database: polling queries would compete
	// with the work being measured.
	for ran.Load() < int64(total) {
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = c.Stop(stopCtx)
			return fmt.Errorf("work: %d of %d jobs ran: %w", ran.Load(), total, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil { // waits for the last completions
		return err
	}
	// The row (jobs/s and CPU per job) is taken before latencies reads
	// every job back: that read is the benchmark's, not the work's.
	rep.add("work (claim+run+complete)", total, time.Since(start), nil)
	waits, runs, err := latencies(ctx, c)
	if err != nil {
		return err
	}
	rep.Wait, rep.Run = percentiles(waits), percentiles(runs)
	rep.text("  wait (run_at→start)   %s\n  run  (start→finish)   %s\n", rep.Wait, rep.Run)
	return nil
}

// latencies reads every job's wait and run time.
func latencies(ctx context.Context, c *idem.Client) (waits, runs []time.Duration, err error) {
	var cursor int64
	for {
		jobs, next, err := c.JobList(ctx, &idem.JobListParams{Limit: 500, Cursor: cursor})
		if err != nil {
			return nil, nil, err
		}
		for _, j := range jobs {
			if j.StartedAt != nil && j.FinishedAt != nil {
				waits = append(waits, j.StartedAt.Sub(j.RunAt))
				runs = append(runs, j.FinishedAt.Sub(*j.StartedAt))
			}
		}
		if next == 0 {
			return waits, runs, nil
		}
		cursor = next
	}
}

// benchReport prints the results of `idem bench` as text lines as they
// come, or collects them for one JSON document (--json).
type benchReport struct {
	w      io.Writer
	asJSON bool

	Store  string     `json:"store"`
	Schema string     `json:"schema,omitempty"`
	Rows   []benchRow `json:"results"`
	Wait   string     `json:"wait_latency,omitempty"`
	Run    string     `json:"run_latency,omitempty"`

	cpuStart time.Duration // processCPU at the start of the current phase
}

// benchRow is one measured step.
type benchRow struct {
	What      string  `json:"what"`
	Jobs      int     `json:"jobs"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"jobs_per_second"`
	Latency   string  `json:"latency,omitempty"`
	// CPUPerJob is the process's CPU time (every goroutine, user and
	// system) per job over the step: on a shared machine it moves less
	// with other load than jobs/s does.
	CPUPerJobUS float64 `json:"cpu_us_per_job,omitempty"`
}

// text prints a line unless the report is JSON.
func (r *benchReport) text(format string, args ...any) {
	if !r.asJSON {
		fmt.Fprintf(r.w, format, args...)
	}
}

// add records (and in text mode prints) one step.
func (r *benchReport) add(what string, n int, d time.Duration, lat []time.Duration) {
	row := benchRow{What: what, Jobs: n, Seconds: d.Seconds(), PerSecond: float64(n) / d.Seconds()}
	if len(lat) > 0 {
		row.Latency = percentiles(lat)
	}
	if cpu := processCPU(); cpu > 0 && n > 0 {
		row.CPUPerJobUS = float64((cpu - r.cpuStart).Microseconds()) / float64(n)
	}
	r.Rows = append(r.Rows, row)
	r.text("%-32s %8d jobs in %8.3fs = %10.0f jobs/s  cpu %6.1fµs/job", what, n, row.Seconds, row.PerSecond, row.CPUPerJobUS)
	if row.Latency != "" {
		r.text("  latency %s", row.Latency)
	}
	r.text("\n")
}

// flush prints the JSON document in JSON mode.
func (r *benchReport) flush() error {
	if !r.asJSON {
		return nil
	}
	return printJSON(r.w, r)
}

// percentiles formats p50/p95/p99 of ds (sorted in place).
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	slices.Sort(ds)
	p := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
	return fmt.Sprintf("p50 %s p95 %s p99 %s", p(0.50).Round(time.Microsecond), p(0.95).Round(time.Microsecond), p(0.99).Round(time.Microsecond))
}
