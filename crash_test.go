package idem_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem"
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
	workers := idem.NewWorkers()
	workers.Handle("crash", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		if _, err := logf.WriteString(strconv.FormatInt(j.ID, 10) + "\n"); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond) // ≥ 1.25 s for all jobs: the parent must catch the run midway
		return json.RawMessage(fmt.Sprintf(`{"id":%d}`, j.ID)), nil
	})
	client, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(8), Logger: quietLogger(),
		LeaseDuration: time.Second, RescueInterval: 100 * time.Millisecond, LeaderTTL: time.Second})
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

func startChild(t *testing.T, db, logPath string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+db, "IDEM_CRASH_CHILD_LOG="+logPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	return cmd
}

// TestCrashRecovery SIGKILLs a worker process mid-run, starts another, and
// proves that every job completes, none is lost, and no job whose result was
// stored runs again.
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
	var all []int64
	for _, chunk := range [][]idem.EnqueueParams{items[:1000], items[1000:]} {
		res, err := client.EnqueueMany(ctx, chunk)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids(res)...)
	}
	completed := func() int64 {
		st, err := client.QueueStats(ctx, "")
		if err != nil || len(st) == 0 {
			return 0
		}
		return st[0].Counts[idem.StateCompleted]
	}

	first := startChild(t, db, logPath)
	waitAll(t, client, all[:n/3], 60*time.Second) // oldest first: a third of the jobs done
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	killedAt := completed()
	if killedAt >= n {
		t.Fatalf("the child finished before it was killed (%d done)", killedAt)
	}

	second := startChild(t, db, logPath)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second child: %v", err)
		}
	case <-time.After(90 * time.Second):
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
		completedAttempts := 0
		for i, a := range attempts {
			if a.Outcome == "completed" {
				completedAttempts++
				if i != len(attempts)-1 {
					t.Fatalf("job %d has an attempt after its completion: %+v", j.ID, attempts)
				}
			}
		}
		if completedAttempts != 1 {
			t.Fatalf("job %d has %d completed attempts", j.ID, completedAttempts)
		}
		// Each handler start is an attempt; a start without its own attempt
		// would be a job run again after its result was stored.
		if starts[j.ID] < 1 || starts[j.ID] > len(attempts) || starts[j.ID] > j.Attempt {
			t.Fatalf("job %d: %d handler starts for %d attempts", j.ID, starts[j.ID], j.Attempt)
		}
		if starts[j.ID] > 1 {
			reran++
		}
	}
	t.Logf("killed with %d of %d completed; %d in-flight jobs ran again after the crash", killedAt, n, reran)
}
