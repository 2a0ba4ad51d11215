package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
)

// workQueue is the queue of bench-growth's work phase, apart from the
// pre-filled backlog in "bench" so that the phase works exactly its jobs.
const workQueue = "growth-work"

// growthWork is bench-growth's end-to-end phase: it enqueues n jobs in
// batches of 1,000 into workQueue and works them with a client of workers
// workers (a no-op handler), as `idem bench` does, beside the pre-filled
// history and backlog. It returns jobs/s, the machine's CPU per job in µs
// (every process: the client, the database and its background workers, so
// a quiet machine is needed; "n/a" without /proc/stat) and, on
// PostgreSQL, how many VACUUMs of jobs ended meanwhile (the store's own,
// see pgstore.Config.VacuumEvery, and autovacuum's; "n/a" on SQLite).
// The store counts the jobs claimed before the phase too, so its first
// VACUUM comes that many jobs early.
func growthWork(ctx context.Context, db *benchDB, n, workers int) (rate float64, cpuPerJob, vacuums string, err error) {
	var ran atomic.Int64
	w := idem.NewWorkers()
	w.Handle("noop", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		ran.Add(1)
		return nil, nil
	})
	client, err := idem.NewClient(db.st, &idem.Config{Workers: w, Logger: discardLogger(), DisableMaintenance: true,
		Queues: map[string]idem.QueueConfig{workQueue: {MaxWorkers: workers}}, FetchLimit: max(workers, 1)})
	if err != nil {
		return 0, "", "", err
	}
	if _, err := benchBatch(ctx, &benchReport{w: io.Discard}, client, n, &idem.EnqueueOpts{Queue: workQueue}); err != nil {
		return 0, "", "", fmt.Errorf("enqueue: %w", err)
	}
	vac0, vacOK, err := jobsVacuums(ctx, db)
	if err != nil {
		return 0, "", "", err
	}
	cpu0, cpuOK := machineBusy()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, "", "", err
	}
	for ran.Load() < int64(n) && ctx.Err() == nil {
		time.Sleep(time.Millisecond) // a counter, not a query: nothing competes with the work
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := client.Stop(stopCtx)
	elapsed := time.Since(start)
	cpu1, _ := machineBusy()
	if ctx.Err() != nil {
		return 0, "", "", fmt.Errorf("%d of %d jobs ran: %w", ran.Load(), n, ctx.Err())
	}
	if stopErr != nil {
		return 0, "", "", stopErr
	}
	if got := ran.Load(); got != int64(n) {
		// Only this phase's jobs are in its queue, each run once.
		return 0, "", "", fmt.Errorf("%d runs of %d jobs", got, n)
	}
	vacuums, cpuPerJob = "n/a", "n/a"
	if vacOK {
		// The statistics of a VACUUM reach pg_stat_user_tables when it
		// ends; one still running is not counted.
		vac1, _, err := jobsVacuums(ctx, db)
		if err != nil {
			return 0, "", "", err
		}
		vacuums = strconv.FormatInt(vac1-vac0, 10)
	}
	if cpuOK {
		cpuPerJob = strconv.FormatFloat(float64((cpu1-cpu0).Microseconds())/float64(n), 'f', 0, 64)
	}
	return float64(n) / elapsed.Seconds(), cpuPerJob, vacuums, nil
}

// jobsVacuums returns how many VACUUMs (manual and automatic) of the jobs
// table PostgreSQL has counted; ok is false on SQLite.
func jobsVacuums(ctx context.Context, db *benchDB) (n int64, ok bool, err error) {
	pg, isPG := db.st.(*pgstore.Store)
	if !isPG || db.schema == "" {
		return 0, false, nil
	}
	err = pg.Pool().QueryRow(ctx, `SELECT vacuum_count + autovacuum_count FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'jobs'`, db.schema).Scan(&n)
	if err != nil {
		return 0, false, fmt.Errorf("VACUUMs of jobs: %w", err)
	}
	return n, true, nil
}

// machineBusy returns the CPU time every processor of the machine spent
// on anything but idling (/proc/stat; Linux only), summed.
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	// user nice system idle iowait irq softirq steal (guest time is
	// already in user and nice).
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond, true // USER_HZ = 100
}
