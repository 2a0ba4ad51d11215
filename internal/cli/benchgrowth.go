package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// growthFlags are the inputs of `idem bench-growth`.
type growthFlags struct {
	db       string
	waiting  string
	finished int
	enqueue  int
	singles  int
	claims   int
	claimN   int
	plan     bool
	keep     bool
	settle   bool
	timeout  time.Duration
	work     int
	workers  int
	// scheduled jobs a day ahead in the bench queue and, with work, in
	// the work queue: the backlog waiting for its run_at.
	scheduled int
}

func newBenchGrowthCmd() *cobra.Command {
	var f growthFlags
	cmd := &cobra.Command{
		Use:   "bench-growth",
		Short: "Measure enqueue and claim cost with large backlogs and histories",
		Long: `For each count of --waiting (comma list), on a fresh database (a temp SQLite
file, or with --database postgres://… a fresh schema, dropped at the end
unless --keep): pre-fills that many available jobs in the bench queue,
--scheduled jobs a day ahead in it (and as many in the work queue with
--work: a backlog waiting for its run_at, which a claim must not read) and
--finished completed jobs, each with its idempotency record and attempt, by
bulk SQL (copies of one job made through the API; seconds per million rows),
ANALYZEs (SQLite: reopens the store and waits for its key filter, which
it builds in the background; the "prefill s" column includes that).
On PostgreSQL with --finished > 0, unless --settle=false, it then settles
the table: a bulk
copy leaves room for one small row at the end of nearly every history page,
which the free-space map hands to the next rows inserted, one page each (a
random page write and, after a checkpoint, a full-page image per row), until
that room is used up. A history the store made over time has no such room
left, so bench-growth first enqueues keyed jobs into queue "settle" (left
waiting there) until a batch of 1,000 lands wholly on new pages of jobs and
records, and reports how many it took and their enqueue rate. Then it measures
  - enqueue: --enqueue jobs in batches of 1,000 and --singles jobs with new
    keys one at a time from 16 goroutines (jobs/s, p50/p99),
  - claim: --claims claims of --claim-n jobs from one goroutine through the
    store, each finished at once (claim p50/p99, claimed+finished jobs/s),
  - work, with --work N: N more jobs enqueued into their own queue and worked
    end to end by a client of --workers workers, as idem bench works them
    (jobs/s; the machine's CPU per job, every process counted, so run it on
    a quiet machine; on PostgreSQL the VACUUMs of jobs that ended meanwhile,
    the store's own and autovacuum's — the store counts the jobs of the
    claim phase too, so its first VACUUM comes that many jobs early),
and on PostgreSQL prints EXPLAIN (ANALYZE, BUFFERS) of the statements of one
claim (captured as the store runs them, run again in a rolled-back
transaction). A claim or enqueue should not get slower as the tables grow.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGrowth(cmd.Context(), cmd.OutOrStdout(), &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.db, "database", "", "postgres://… (a fresh schema per size) or nothing for temp SQLite files")
	fl.StringVar(&f.waiting, "waiting", "10000,100000,1000000", "comma list of available jobs to pre-fill, one run each")
	fl.IntVar(&f.finished, "finished", 0, "completed jobs (with records and attempts) to pre-fill in every run")
	fl.IntVar(&f.scheduled, "scheduled", 0, "jobs scheduled a day ahead to pre-fill in the bench queue (and as many in the work queue with --work)")
	fl.IntVar(&f.enqueue, "enqueue", 20000, "jobs enqueued in batches of 1,000")
	fl.IntVar(&f.singles, "singles", 5000, "keyed jobs enqueued one at a time from 16 goroutines")
	fl.IntVar(&f.claims, "claims", 100, "claims measured")
	fl.IntVar(&f.claimN, "claim-n", 100, "jobs per claim")
	fl.BoolVar(&f.plan, "plan", true, "PostgreSQL: print EXPLAIN (ANALYZE, BUFFERS) of a claim")
	fl.BoolVar(&f.keep, "keep", false, "keep the schemas or temp files")
	fl.BoolVar(&f.settle, "settle", true, "PostgreSQL: use up the room the bulk copy left on history pages before measuring")
	fl.IntVar(&f.work, "work", 0, "jobs worked end to end after the claims, by a client of --workers workers (0: no work phase)")
	fl.IntVar(&f.workers, "workers", 100, "workers of the work phase")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Minute, "limit of the whole run")
	return cmd
}

func runGrowth(ctx context.Context, w io.Writer, f *growthFlags) error {
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	var sizes []int
	for s := range strings.SplitSeq(f.waiting, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return usageErr(fmt.Errorf("--waiting: %q is not a count", s))
		}
		sizes = append(sizes, n)
	}
	if f.db != "" && !isPostgres(f.db) {
		return usageErr(errors.New("--database is for PostgreSQL; on SQLite bench-growth makes a temp file per size"))
	}
	if f.claims < 1 || f.claimN < 1 || f.workers < 1 || f.enqueue < 0 || f.singles < 0 || f.finished < 0 || f.work < 0 || f.scheduled < 0 {
		return usageErr(errors.New("--claims, --claim-n and --workers must be positive, counts not negative"))
	}
	fmt.Fprintf(w, "idem bench-growth  store=%s  finished=%d  scheduled=%d  enqueue=%d singles=%d claims=%d×%d  load average %s\n",
		storeName(f.db), f.finished, f.scheduled, f.enqueue, f.singles, f.claims, f.claimN, loadAvg())
	head := "| waiting | finished | prefill s | settle jobs (jobs/s) | enqueue batch jobs/s | keyed single jobs/s | single p50 / p99 | claim p50 / p99 | claim+finish jobs/s |"
	rule := "|---:|---:|---:|---|---:|---:|---|---|---:|"
	if f.work > 0 {
		head += fmt.Sprintf(" work jobs/s (%d workers) | machine CPU µs/job | VACUUMs of jobs |", f.workers)
		rule += "---:|---:|---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	var plans []string
	for _, n := range sizes {
		line, plan, err := growthRun(ctx, f, n)
		if err != nil {
			return fmt.Errorf("waiting %d: %w", n, err)
		}
		fmt.Fprintln(w, line)
		if plan != "" {
			plans = append(plans, fmt.Sprintf("claim plan, %d waiting, %d finished:\n%s", n, f.finished, plan))
		}
	}
	for _, p := range plans {
		fmt.Fprintf(w, "\n%s\n", p)
	}
	fmt.Fprintf(w, "\nload average at the end %s\n", loadAvg())
	return nil
}

// growthRun runs one configuration on a fresh database and returns its
// table line and, on PostgreSQL, the claim's plan.
func growthRun(ctx context.Context, f *growthFlags, waiting int) (line, plan string, err error) {
	tr := &claimTracer{}
	var tracer pgx.QueryTracer
	if isPostgres(f.db) {
		tracer = tr
	}
	schema := ""
	if isPostgres(f.db) {
		schema = fmt.Sprintf("idem_growth_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	}
	db, url, err := openBenchDBTraced(ctx, f.db, schema, f.keep, tracer)
	if err != nil {
		return "", "", err
	}
	defer func() { err = errors.Join(err, db.close(ctx, url)) }()
	start := time.Now()
	var later []string
	if f.scheduled > 0 {
		later = []string{"bench"}
		if f.work > 0 {
			later = append(later, workQueue)
		}
	}
	if err := prefill(ctx, db, url, waiting, f.finished, f.scheduled, later); err != nil {
		return "", "", fmt.Errorf("prefill: %w", err)
	}
	prefillS := time.Since(start).Seconds()
	client, err := idem.NewClient(db.st, &idem.Config{DisableMaintenance: true, Logger: discardLogger()})
	if err != nil {
		return "", "", err
	}
	settled := "n/a"
	if f.settle && db.schema != "" && f.finished > 0 {
		n, d, err := settle(ctx, db, url, client)
		if err != nil {
			return "", "", fmt.Errorf("settle: %w", err)
		}
		settled = fmt.Sprintf("%s (%s)", thousands(n), thousands(int(float64(n)/d.Seconds()+0.5)))
	}
	opts := &idem.EnqueueOpts{Queue: "bench"}
	batchRate := 0.0
	if f.enqueue > 0 {
		t := time.Now()
		if _, err := benchBatch(ctx, &benchReport{w: io.Discard}, client, f.enqueue, opts); err != nil {
			return "", "", err
		}
		batchRate = float64(f.enqueue) / time.Since(t).Seconds()
	}
	singleRate, singleLat := 0.0, "n/a"
	if f.singles > 0 {
		lat := make([][]time.Duration, 16)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		t := time.Now()
		for g := range 16 {
			wg.Go(func() {
				for i := g; i < f.singles; i += 16 {
					o := *opts
					o.IdempotencyKey = "growth-" + strconv.Itoa(i)
					t0 := time.Now()
					if _, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "noop", Opts: &o}); err != nil {
						mu.Lock()
						firstErr = cmpOr(firstErr, err)
						mu.Unlock()
						return
					}
					lat[g] = append(lat[g], time.Since(t0))
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			return "", "", fmt.Errorf("keyed single enqueue: %w", firstErr)
		}
		singleRate = float64(f.singles) / time.Since(t).Seconds()
		singleLat = p5099(slices.Concat(lat...))
	}
	claimLat, claimRate, err := growthClaims(ctx, db.st, f)
	if err != nil {
		return "", "", err
	}
	if f.plan && db.schema != "" {
		if plan, err = explainClaim(ctx, db, url, tr, f.claimN); err != nil {
			return "", "", fmt.Errorf("explain: %w", err)
		}
	}
	line = fmt.Sprintf("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s |", thousands(waiting), thousands(f.finished), prefillS,
		settled, thousands(int(batchRate+0.5)), thousands(int(singleRate+0.5)), singleLat, claimLat, thousands(int(claimRate+0.5)))
	if f.work > 0 {
		rate, cpu, vacuums, err := growthWork(ctx, db, f.work, f.workers)
		if err != nil {
			return "", "", fmt.Errorf("work: %w", err)
		}
		line += fmt.Sprintf(" %s | %s | %s |", thousands(int(rate+0.5)), cpu, vacuums)
	}
	return line, plan, nil
}

// discardLogger drops the log lines of bench-growth's clients.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// growthClaims claims f.claims times f.claimN jobs of the bench queue from one
// goroutine, finishing each claim at once; it returns the claim latency
// p50/p99 and the claimed+finished jobs/s.
func growthClaims(ctx context.Context, st store.Store, f *growthFlags) (string, float64, error) {
	var lat []time.Duration
	jobs := 0
	start := time.Now()
	for range f.claims {
		t := time.Now()
		got, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"bench"}, WorkerID: "growth", Limit: f.claimN,
			LeaseUntil: time.Now().Add(time.Minute)})
		if err != nil {
			return "", 0, fmt.Errorf("claim: %w", err)
		}
		lat = append(lat, time.Since(t))
		if len(got) == 0 {
			break
		}
		fin := make([]*store.JobFinishParams, len(got))
		for i, j := range got {
			fin[i] = &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
				Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(`null`), FinishedAt: time.Now()}
		}
		if _, err := st.JobFinishMany(ctx, fin); err != nil {
			return "", 0, fmt.Errorf("finish: %w", err)
		}
		jobs += len(got)
	}
	return p5099(lat), float64(jobs) / time.Since(start).Seconds(), nil
}

// p5099 formats the median and 99th percentile of ds (sorted in place).
func p5099(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	slices.Sort(ds)
	p := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
	return fmt.Sprintf("%s / %s", p(0.50).Round(10*time.Microsecond), p(0.99).Round(10*time.Microsecond))
}

// thousands formats n with thousands separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Template keys of the jobs the pre-fill copies.
const (
	growthFinishedKey = "growth-template-finished"
	// growthChunk is the rows per bulk statement.
	growthChunk = 100_000
)

// settleMax bounds the jobs settle enqueues.
const settleMax = 2_000_000

// settle enqueues batches of keyed jobs into queue "settle" until one batch
// lands wholly on pages the jobs and records tables did not have before,
// that is until the room the bulk copy left on the history's pages is used
// up, then checkpoints. It returns the jobs enqueued and the time their
// enqueues took (not the checks between them); an error if settleMax jobs
// did not settle the table.
func settle(ctx context.Context, db *benchDB, url string, c *idem.Client) (int, time.Duration, error) {
	conn, err := pgstore.Connect(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	jobs, records := pgx.Identifier{db.schema, "jobs"}.Sanitize(), pgx.Identifier{db.schema, "records"}.Sanitize()
	var jobPages, recPages, after int64
	if err := conn.QueryRow(ctx, "SELECT pg_relation_size('"+jobs+"') / current_setting('block_size')::int, "+
		"pg_relation_size('"+records+"') / current_setting('block_size')::int, coalesce(max(id), 0) FROM "+jobs).
		Scan(&jobPages, &recPages, &after); err != nil {
		return 0, 0, err
	}
	n, took := 0, time.Duration(0)
	for {
		if n >= settleMax {
			return 0, 0, fmt.Errorf("%d jobs did not settle the table", n)
		}
		items, keys := make([]idem.EnqueueParams, idem.MaxBatch), make([]string, idem.MaxBatch)
		for i := range items {
			keys[i] = "settle-" + strconv.Itoa(n+i)
			items[i] = idem.EnqueueParams{Kind: "noop", Opts: &idem.EnqueueOpts{Queue: "settle", IdempotencyKey: keys[i]}}
		}
		start := time.Now()
		res, err := c.EnqueueMany(ctx, items)
		took += time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		for _, r := range res {
			if r.Err != nil {
				return 0, 0, r.Err
			}
		}
		n += len(items)
		// The batch's rows on pages the tables had before settling.
		var oldJobs, oldRecs, last int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE (ctid::text::point)[0] < $1), coalesce(max(id), $2) FROM "+
			jobs+" WHERE id > $2", jobPages, after).Scan(&oldJobs, &last); err != nil {
			return 0, 0, err
		}
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+records+" WHERE tenant = $1 AND key = ANY($2) "+
			"AND (ctid::text::point)[0] < $3", idem.DefaultTenant, keys, recPages).Scan(&oldRecs); err != nil {
			return 0, 0, err
		}
		after = last
		if oldJobs == 0 && oldRecs == 0 {
			break
		}
	}
	_, err = conn.Exec(ctx, "CHECKPOINT")
	return n, took, err
}

// prefill makes one completed keyed job (queue "history") and one available
// job (queue "bench") through the API, then copies them by bulk SQL:
// finished-1 more completed jobs with their records and attempts, and
// waiting-1 more available jobs.
//
// With scheduled > 0, one job scheduled a day ahead in each queue of later,
// copied scheduled-1 times too.
func prefill(ctx context.Context, db *benchDB, url string, waiting, finished, scheduled int, later []string) error {
	if waiting == 0 && finished == 0 && len(later) == 0 {
		return nil
	}
	workers := idem.NewWorkers()
	workers.Handle("noop", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
	c, err := idem.NewClient(db.st, &idem.Config{Workers: workers, Queues: map[string]idem.QueueConfig{"history": {MaxWorkers: 1}},
		DisableMaintenance: true, Logger: discardLogger()})
	if err != nil {
		return err
	}
	var finID, waitID int64
	if finished > 0 {
		res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "noop", Opts: &idem.EnqueueOpts{Queue: "history", IdempotencyKey: growthFinishedKey}})
		if err != nil {
			return err
		}
		finID = res.Job.ID
		if err := c.Start(ctx); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = c.JobWait(wctx, finID)
		cancel()
		if serr := c.Stop(context.WithoutCancel(ctx)); err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("template job: %w", err)
		}
	}
	if waiting > 0 {
		res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "noop", Opts: &idem.EnqueueOpts{Queue: "bench"}})
		if err != nil {
			return err
		}
		waitID = res.Job.ID
	}
	var laterIDs []int64
	for _, q := range later {
		res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "noop", Opts: &idem.EnqueueOpts{Queue: q, RunAt: time.Now().Add(24 * time.Hour)}})
		if err != nil {
			return err
		}
		laterIDs = append(laterIDs, res.Job.ID)
	}
	rows := growthRows{finID: finID, waitID: waitID, laterIDs: laterIDs, waiting: waiting, finished: finished, scheduled: scheduled}
	if db.schema != "" {
		conn, err := pgstore.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		ex := func(q string, args ...any) error { _, err := conn.Exec(ctx, q, args...); return err }
		cols := func(table string) ([]string, error) {
			rows, err := conn.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2"+
				" AND is_generated = 'NEVER' AND column_name <> 'id' ORDER BY ordinal_position", db.schema, table)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		}
		q := func(t string) string { return pgx.Identifier{db.schema, t}.Sanitize() }
		maxID := func() (int64, error) {
			var id int64
			err := conn.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM "+q("jobs")).Scan(&id)
			return id, err
		}
		if err := copyRows(ctx, &pgDialect{q: q, cols: cols}, ex, maxID, &rows); err != nil {
			return err
		}
		// VACUUM too: a history the store has been working is vacuumed
		// (pgstore's own VACUUM every 50,000 claims), so its pages are
		// all-visible; bulk-inserted rows are not until a VACUUM.
		for _, t := range []string{"jobs", "records", "attempts"} {
			if err := ex("VACUUM (ANALYZE) " + q(t)); err != nil {
				return err
			}
		}
		return ex("CHECKPOINT")
	}
	// SQLite: the store holds the file; close it, copy, open it again.
	if err := db.st.Close(); err != nil {
		return err
	}
	path := sqlitePath(url)
	sdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	ex := func(q string, args ...any) error { _, err := sdb.ExecContext(ctx, q, args...); return err }
	cols := func(table string) ([]string, error) {
		rows, err := sdb.QueryContext(ctx, "SELECT name FROM pragma_table_info(?) WHERE name <> 'id' ORDER BY cid", table)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return nil, err
			}
			out = append(out, n)
		}
		return out, rows.Err()
	}
	maxID := func() (int64, error) {
		var id int64
		err := sdb.QueryRowContext(ctx, "SELECT max((SELECT coalesce(max(id), 0) FROM jobs), (SELECT coalesce(max(seq), 0) FROM job_seq))").Scan(&id)
		return id, err
	}
	err = copyRows(ctx, &sqliteDialect{cols: cols}, ex, maxID, &rows)
	if err == nil {
		err = ex("ANALYZE")
	}
	err = errors.Join(err, sdb.Close())
	if err != nil {
		return err
	}
	st, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		return err
	}
	db.st = st
	// The reopened store builds its filter of recorded keys in the
	// background; until it is ready every keyed insert reads first and the
	// scan shares the CPU (a few seconds for a million records). That
	// warm-up is not the steady cost of the history: wait for it.
	return st.WaitKeyFilter(ctx)
}

// dialect is what differs between the stores' bulk SQL.
type dialect interface {
	table(name string) string
	columns(name string) ([]string, error)
	// series returns a FROM item g(n) of n = from..to.
	series(from, to int) string
	// explicitIDs: new jobs need an id (SQLite: the store allocates them).
	explicitIDs() bool
	// recordsTable is the table of idempotency records.
	recordsTable() string
}

func (d *pgDialect) recordsTable() string     { return "records" }
func (d *sqliteDialect) recordsTable() string { return "idem_keys" }

type pgDialect struct {
	q    func(string) string
	cols func(string) ([]string, error)
}

func (d *pgDialect) table(n string) string              { return d.q(n) }
func (d *pgDialect) columns(n string) ([]string, error) { return d.cols(n) }
func (d *pgDialect) series(from, to int) string {
	return fmt.Sprintf("generate_series(%d, %d) AS g(n)", from, to)
}
func (d *pgDialect) explicitIDs() bool                      { return false }
func (d *sqliteDialect) table(n string) string              { return n }
func (d *sqliteDialect) columns(n string) ([]string, error) { return d.cols(n) }
func (d *sqliteDialect) explicitIDs() bool                  { return true }

type sqliteDialect struct {
	cols func(string) ([]string, error)
}

func (d *sqliteDialect) series(from, to int) string {
	return fmt.Sprintf("(WITH RECURSIVE s(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT n FROM s) AS g", from, to)
}

// growthRows is what copyRows copies: templates and counts.
type growthRows struct {
	finID, waitID                int64
	laterIDs                     []int64 // one scheduled template per queue
	waiting, finished, scheduled int
}

// copyRows copies the template jobs in chunks: completed job finID (with
// its record and attempts) finished-1 times, available job waitID
// waiting-1 times, each scheduled one of laterIDs scheduled-1 times.
func copyRows(ctx context.Context, d dialect, ex func(string, ...any) error, maxID func() (int64, error), r *growthRows) error {
	finID, waitID, waiting, finished := r.finID, r.waitID, r.waiting, r.finished
	jobCols, err := d.columns("jobs")
	if err != nil {
		return err
	}
	recCols, err := d.columns(d.recordsTable())
	if err != nil {
		return err
	}
	attCols, err := d.columns("attempts")
	if err != nil {
		return err
	}
	jobs, records, attempts := d.table("jobs"), d.table(d.recordsTable()), d.table("attempts")
	// insertJobs copies job tmpl for n in [from, to], with the key key(n).
	insertJobs := func(tmpl int64, from, to int, key string) error {
		cols, sel := slices.Clone(jobCols), make([]string, len(jobCols))
		for i, c := range cols {
			sel[i] = "t." + c
			if c == "idempotency_key" && key != "" {
				sel[i] = key
			}
		}
		if d.explicitIDs() {
			base, err := maxID()
			if err != nil {
				return err
			}
			cols = append([]string{"id"}, cols...)
			sel = append([]string{fmt.Sprintf("%d + g.n - %d", base, from-1)}, sel...)
		}
		return ex(fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s AS t, %s WHERE t.id = %d",
			jobs, strings.Join(cols, ", "), strings.Join(sel, ", "), jobs, d.series(from, to), tmpl))
	}
	for from := 1; from < finished; from += growthChunk {
		to := min(finished-1, from+growthChunk-1)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := insertJobs(finID, from, to, "'growth-history-' || g.n"); err != nil {
			return fmt.Errorf("finished jobs: %w", err)
		}
		// The chunk's jobs are the newest jobs of the history queue.
		newest := fmt.Sprintf("(SELECT id, idempotency_key FROM %s WHERE tenant = 'default' AND queue = 'history' ORDER BY id DESC LIMIT %d) AS j",
			jobs, to-from+1)
		sel := make([]string, len(recCols))
		for i, c := range recCols {
			switch c {
			case "key":
				sel[i] = "j.idempotency_key"
			case "job_id", "result_job_id":
				sel[i] = "j.id"
			default:
				sel[i] = "r." + c
			}
		}
		if err := ex(fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s AS r, %s WHERE r.job_id = %d",
			records, strings.Join(recCols, ", "), strings.Join(sel, ", "), records, newest, finID)); err != nil {
			return fmt.Errorf("records: %w", err)
		}
		asel := make([]string, len(attCols))
		for i, c := range attCols {
			asel[i] = "a." + c
			if c == "job_id" {
				asel[i] = "j.id"
			}
		}
		if err := ex(fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s AS a, %s WHERE a.job_id = %d",
			attempts, strings.Join(attCols, ", "), strings.Join(asel, ", "), attempts, newest, finID)); err != nil {
			return fmt.Errorf("attempts: %w", err)
		}
	}
	for from := 1; from < waiting; from += growthChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := insertJobs(waitID, from, min(waiting-1, from+growthChunk-1), ""); err != nil {
			return fmt.Errorf("waiting jobs: %w", err)
		}
	}
	for _, id := range r.laterIDs {
		for from := 1; from < r.scheduled; from += growthChunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := insertJobs(id, from, min(r.scheduled-1, from+growthChunk-1), ""); err != nil {
				return fmt.Errorf("scheduled jobs: %w", err)
			}
		}
	}
	return nil
}
