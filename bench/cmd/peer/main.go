// Command peer compares idem on PostgreSQL with River (v0.51) on the same
// database, on the same machine, in the same run, and prints one table:
// scenario | idem | River | ratio (idem/River).
//
//	cd bench && go run ./cmd/peer                        # the PostgreSQL rows of issue 14 (a few minutes)
//	cd bench && go run ./cmd/peer --table full           # also keyed single inserts and River InsertMany
//	cd bench && go run ./cmd/peer --scenarios multinode  # 1, 2, 3 idem processes; SIGKILL of the leader
//	cd bench && go run ./cmd/peer --quick                # small N, a smoke run
//
// The database is IDEM_TEST_DATABASE_URL, or
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Every measurement
// gets its own fresh schema (idem: pgstore's migrations; River: rivermigrate),
// created before and dropped after it. Both systems get the same pgxpool
// size (--conns). A CHECKPOINT runs before each measurement so that neither
// system pays for the other's dirty pages.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"
)

func main() {
	opts := defaultOptions()
	_ = newFlagSet(opts).Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, opts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

// newFlagSet returns the command's flags, bound to o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("peer", flag.ExitOnError)
	o.register(fs)
	return fs
}

// loadAvg returns the 1, 5 and 15 minute load averages of /proc/loadavg,
// or "n/a".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// quietLogger discards every log line of both systems.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// run runs the selected scenarios and prints the table to out; progress
// lines go to progress.
func run(ctx context.Context, o *options, out, progress io.Writer) error {
	if err := o.finish(); err != nil {
		return err
	}
	h, err := newHarness(ctx, o, progress)
	if err != nil {
		return err
	}
	defer h.close()
	fmt.Fprintf(progress, "peer: %s; PostgreSQL %s; single N=%d (%d goroutines), batch N=%d (batches of %d), work N=%d (%d workers), pool %d conns\n",
		time.Now().Format(time.RFC3339), h.pgVersion, o.SingleN, o.Goroutines, o.BatchN, o.BatchSize, o.WorkN, o.Workers, o.Conns)
	startLoad := loadAvg()
	fmt.Fprintf(out, "peer: %s, PostgreSQL %s, %d CPUs, load average at the start %s\n\n",
		time.Now().UTC().Format(time.RFC3339), h.pgVersion, runtime.NumCPU(), startLoad)
	defer func() { fmt.Fprintf(out, "\nload average at the start %s, at the end %s\n", startLoad, loadAvg()) }()
	var rows []row
	for _, st := range o.steps() {
		r, err := h.scenario(ctx, st.name, st.keys)
		if err != nil {
			if len(rows) > 0 { // what was measured before the failure or interrupt
				printTable(out, rows)
			}
			return fmt.Errorf("%s (keys %v): %w", st.name, st.keys, err)
		}
		rows = append(rows, r...)
	}
	if len(rows) > 0 {
		printTable(out, rows)
	}
	if o.hasScenario("multinode") {
		res, err := h.multinode(ctx)
		if err != nil {
			return fmt.Errorf("multinode: %w", err)
		}
		printMultinode(out, o, res)
	}
	return nil
}
