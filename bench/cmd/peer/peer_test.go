package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// needPostgres skips the test when PostgreSQL is not reachable (this module
// is not part of the root `go test ./...`).
func needPostgres(t *testing.T, o *options) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	conn, err := pgx.Connect(ctx, o.URL)
	cancel()
	if err != nil {
		t.Skipf("PostgreSQL not reachable at %s: %v", o.URL, err)
	}
	_ = conn.Close(context.Background())
}

// TestQuick runs the whole comparison with --quick --table full.
func TestQuick(t *testing.T) {
	t.Parallel()
	o := defaultOptions()
	needPostgres(t, o)
	o.Quick, o.Table = true, "full"
	var out bytes.Buffer
	if err := run(t.Context(), o, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	t.Log("\n" + table)
	for _, want := range []string{
		"| scenario | idem | River | ratio (idem/River) |",
		"single insert, 16 goroutines (jobs/s)", "single insert, 16 goroutines, keys p99",
		"vs InsertManyFast/COPY", "work 5,000 no-op, 100 workers, keys",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if n := strings.Count("\n"+table, "\n| "); n != 1+12+12 {
		t.Errorf("table has %d rows, want header, 12 and 2 CPU rows for each of 6 measurements:\n%s", n, table)
	}
	checkCPURows(t, table, 12)
}

// checkCPURows checks that table has n CPU rows, that every client row
// shows CPU time for both systems, and that the backends' rows do too
// somewhere: a meter that found no backend (or read no /proc entry) would
// show 0 µs everywhere. (A backend's CPU is counted in 10 ms ticks, so one
// small measurement may honestly read 0.)
func checkCPURows(t *testing.T, table string, n int) {
	t.Helper()
	got, backends := 0, 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.Contains(line, "CPU per job |") {
			continue
		}
		got++
		zero := strings.Contains(line, "| 0 µs |")
		switch {
		case strings.Contains(line, "client CPU") && zero:
			t.Errorf("client CPU row with 0 µs: %s", line)
		case strings.Contains(line, "backends' CPU") && !zero:
			backends++
		}
	}
	if got != n || backends == 0 {
		t.Errorf("%d CPU rows (want %d), %d backends' rows with CPU for both systems (want some):\n%s", got, n, backends, table)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--scenarios", "work", "--keys", "on"}, true},
		{[]string{"--scenarios", "nope"}, false},
		{[]string{"--keys", "maybe"}, false},
		{[]string{"--batch-size", "1001"}, false},
		{[]string{"--table", "nope"}, false},
		{[]string{"--scenarios", "multinode", "--mn-nodes", "1,x"}, false},
		{[]string{"--scenarios", "single,multinode", "--mn-nodes", "2"}, true},
	} {
		o := defaultOptions()
		fs := newFlagSet(o)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := o.finish(); (err == nil) != tc.ok {
			t.Errorf("%v: finish() = %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}

// TestIssueTableAndMultinode: the default table has the five rows of issue
// 14 (single with p50/p99) with targets, and the multinode scenario builds
// the idem binary, works a backlog with 1 and 2 processes and times the
// rescue after a SIGKILL of the leader (short lease settings so the test
// stays quick).
func TestIssueTableAndMultinode(t *testing.T) {
	t.Parallel()
	o := defaultOptions()
	needPostgres(t, o)
	o.Quick, o.Scenarios = true, "single,batch,work,multinode"
	o.SingleN, o.BatchN, o.WorkN, o.MNJobs = 500, 2000, 2000, 2000
	o.MNNodes, o.MNLease, o.MNRescueInterval, o.MNLeaderTTL = "1,2", "2s", "500ms", "1500ms"
	var out bytes.Buffer
	if err := run(t.Context(), o, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	t.Log("\n" + table)
	for _, want := range []string{
		"issue 14 target", "PG single insert, 16 goroutines (jobs/s)", "PG batch of 1,000 vs River COPY",
		"PG batch of 1,000 with keys vs River COPY unique", "PG work 2,000 no-op, 100 workers",
		"PG work 2,000 no-op with keys", "| 2 | ", "lease=2s", "new leader elected", "every job of the killed leader rescued",
		"load average at the start",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("output lacks %q:\n%s", want, table)
		}
	}
	if n := strings.Count(table, "issue 14 target") + strings.Count(table, ": met |") + strings.Count(table, ": not met |"); n != 1+5 {
		t.Errorf("want a header and 5 rows with targets, got %d:\n%s", n, table)
	}
	checkCPURows(t, table, 10)
}
