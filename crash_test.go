package idem_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// crashChildEnv makes the test binary act as a worker process (see TestMain).
const crashChildEnv = "IDEM_CRASH_CHILD_DB"

// crashChild works jobs of the database named in the environment until every
// job is completed, logging each handler start to IDEM_CRASH_CHILD_LOG.
func crashChild() int {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, os.Getenv(crashChildEnv), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer st.Close()
	logf, err := os.OpenFile(os.Getenv("IDEM_CRASH_CHILD_LOG"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "log:", err)
		return 2
	}
	hold, _ := childCommands()
	workers := idem.NewWorkers()
	workers.Handle("crash", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		if _, err := logf.WriteString(strconv.FormatInt(j.ID, 10) + "\n"); err != nil {
			return nil, err
		}
		if hold.hold() {
			return nil, holdUntilKilled(ctx, j)
		}
		time.Sleep(5 * time.Millisecond) // simulates work
		return json.RawMessage(fmt.Sprintf(`{"id":%d}`, j.ID)), nil
	})
	// A 3 s lease: a 1 s one lapsed under a running handler on a starved
	// child (load 20 on 2 cores, -race), which the strict re-run check
	// counts as a re-run of a job that was not running at the kill.
	client, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(8), Logger: quietLogger(),
		LeaseDuration: 3 * time.Second, RescueInterval: 100 * time.Millisecond, LeaderTTL: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	if err := client.Start(ctx); err != nil {
		return 2
	}
	if err := waitEveryJob(ctx, client); err != nil {
		fmt.Fprintln(os.Stderr, "wait:", err)
		return 2
	}
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return 3
	}
	return 0
}

// waitEveryJob waits with JobWait until every job of the store is finished.
func waitEveryJob(ctx context.Context, client *idem.Client) error {
	p := &idem.JobListParams{Limit: 500}
	for {
		rows, next, err := client.JobListAll(ctx, p)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if _, err := client.JobWait(ctx, r.ID); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		p.Cursor = next
	}
}

func startChild(t *testing.T, db, logPath string) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	cmd, stdin, stdout := dbtest.StartChild(t, crashChildEnv+"="+db, "IDEM_CRASH_CHILD_LOG="+logPath)
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, stdin, stdout
}

// TestCrashRecovery SIGKILLs a worker process mid-run, starts another, and
// proves that every job completes with its result, none is lost, and the
// jobs whose handler ran again are a non-empty subset of the jobs running
// at the kill, each with exactly one lost attempt. The kill comes right
// after the child reports a held handler (hold_test.go), so at least one
// started handler is in flight at the kill and must run again.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, logPath := filepath.Join(dir, "crash.db"), filepath.Join(dir, "starts.log")
	st, err := sqlitestore.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	client, _ := idem.NewClient(st, &idem.Config{Logger: quietLogger()})
	const n = 2000
	items := make([]idem.EnqueueParams, n)
	for i := range items {
		items[i] = idem.EnqueueParams{Kind: "crash", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			Opts: &idem.EnqueueOpts{IdempotencyKey: fmt.Sprintf("crash-%d", i)}}
	}
	for _, chunk := range [][]idem.EnqueueParams{items[:1000], items[1000:]} {
		if _, err := client.EnqueueMany(ctx, chunk); err != nil {
			t.Fatal(err)
		}
	}
	completed := func() int64 {
		st, err := client.QueueStats(ctx, "")
		if err != nil || len(st) == 0 {
			return 0
		}
		return st[0].Counts[idem.StateCompleted]
	}

	first, stdin, stdout := startChild(t, db, logPath)
	// The child holds from its (n/3)-th handler start on: killed about a
	// third of the way in, with handlers in flight.
	held := holdThenKill(t, n/3, stdin, stdout, func() {
		if err := first.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.Wait()
	})
	killedAt := completed()
	if killedAt >= n {
		t.Fatalf("the child finished before it was killed (%d done)", killedAt)
	}
	// The dead child's jobs still marked running are the only ones that may
	// run again: every other job either finished or was never claimed.
	runningAtKill := listIDs(ctx, t, client, idem.StateRunning)
	if len(runningAtKill) == 0 {
		t.Fatal("no job was running when the child was killed")
	}

	for id := range held {
		if !runningAtKill[id] {
			t.Fatalf("job %d was held by the killed child but is not running", id)
		}
	}

	second, _, _ := startChild(t, db, logPath)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second child: %v", err)
		}
	case <-time.After(180 * time.Second): // generous: ~1300 jobs under -race on a loaded machine
		_ = second.Process.Kill()
		t.Fatalf("second child did not finish; %d of %d completed", completed(), n)
	}

	starts := map[int64]int{}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("log line %q", sc.Text())
		}
		starts[id]++
	}
	jobs, next, err := client.JobList(ctx, &idem.JobListParams{Limit: 500})
	for err == nil && next != 0 {
		var more []*idem.JobRow
		more, next, err = client.JobList(ctx, &idem.JobListParams{Limit: 500, Cursor: next})
		jobs = append(jobs, more...)
	}
	if err != nil || len(jobs) != n {
		t.Fatalf("listed %d jobs (%v), want %d", len(jobs), err, n)
	}
	reran := 0
	for _, j := range jobs {
		if j.State != idem.StateCompleted || string(j.Result) != fmt.Sprintf(`{"id":%d}`, j.ID) {
			t.Fatalf("job %d: state %s result %s", j.ID, j.State, j.Result)
		}
		attempts, err := client.JobAttempts(ctx, "", j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if starts[j.ID] > 1 {
			reran++
		}
		checkCrashAttempts(t, j, attempts, starts[j.ID], runningAtKill[j.ID])
	}
	// Every job running at the kill has one lost attempt (checked above),
	// but its handler need not have started before the kill (a job claimed
	// and still taking its key lease runs once, as attempt 2). A held job's
	// handler had started: it must have run again.
	for id := range held {
		if starts[id] != 2 {
			t.Fatalf("job %d was held (in its handler) at the kill but started %d times", id, starts[id])
		}
	}
	if reran == 0 {
		t.Fatal("no handler ran again after the kill")
	}
	t.Logf("killed with %d of %d completed; %d of the %d running jobs ran again after the crash", killedAt, n, reran, len(runningAtKill))
}

// checkCrashAttempts bounds the re-runs of one job after a crash: a job that
// was not running at the kill ran exactly once, in one completed attempt; a
// job that was running lost exactly one attempt (rescued, with
// store.RescuedError) and completed in the next, its handler started at most
// twice (the lost attempt may have died before its handler started).
func checkCrashAttempts(t *testing.T, j *idem.JobRow, attempts []*idem.Attempt, starts int, wasRunning bool) {
	t.Helper()
	if starts < 1 {
		t.Fatalf("job %d never started", j.ID)
	}
	last := attempts[len(attempts)-1]
	if last.Outcome != "completed" {
		t.Fatalf("job %d: last attempt %+v, want completed", j.ID, last)
	}
	if !wasRunning {
		if len(attempts) != 1 || starts != 1 || j.Attempt != 1 {
			t.Fatalf("job %d was not running at the kill but has %d attempts, %d starts (attempt %d): %s",
				j.ID, len(attempts), starts, j.Attempt, describeAttempts(attempts))
		}
		return
	}
	lost := attempts[0]
	if len(attempts) != 2 || j.Attempt != 2 || starts > 2 || lost.Outcome != "lost" || lost.Error != store.RescuedError {
		t.Fatalf("job %d was running at the kill: %d attempts (first %q %q), %d starts, attempt %d; want one lost attempt then one completed",
			j.ID, len(attempts), lost.Outcome, lost.Error, starts, j.Attempt)
	}
}

// describeAttempts renders attempts for a failure message.
func describeAttempts(attempts []*idem.Attempt) string {
	var b strings.Builder
	for _, a := range attempts {
		fmt.Fprintf(&b, "[%d %s %q by %s at %s, %d ms] ", a.Attempt, a.Outcome, a.Error, a.WorkerID,
			a.StartedAt.Format("15:04:05.000"), a.DurationMS)
	}
	return b.String()
}

// listIDs returns the ids of the jobs in state, across every page.
func listIDs(ctx context.Context, t *testing.T, c *idem.Client, state idem.JobState) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	p := &idem.JobListParams{Limit: 500, Filter: idem.JobFilter{States: []idem.JobState{state}}}
	for {
		rows, next, err := c.JobListAll(ctx, p)
		if err != nil {
			t.Fatalf("list %s jobs: %v", state, err)
		}
		for _, r := range rows {
			out[r.ID] = true
		}
		if next == 0 {
			return out
		}
		p.Cursor = next
	}
}
