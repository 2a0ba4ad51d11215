package idemhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/internal/dbtest"
)

// pausedWorkerEnv makes the test binary a pull worker that the test pauses
// (see TestMain): it claims one job, prints "claimed <id>", waits for a
// line on stdin, completes the job with the same result any worker would
// give, and prints "complete <HTTP status>".
const pausedWorkerEnv = "IDEMHTTP_TEST_PAUSED"

// runPausedWorker is the paused pull worker.
func runPausedWorker() int {
	ctx := context.Background()
	cl, err := idemclient.New(os.Getenv("IDEM_URL"), &idemclient.Config{APIKey: os.Getenv("IDEM_API_KEY")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"pause"},
		WorkerID: "paused", Lease: time.Second, Wait: 30 * time.Second})
	if err != nil || len(jobs) != 1 {
		fmt.Fprintln(os.Stderr, "claim:", err, len(jobs))
		return 2
	}
	fmt.Printf("claimed %s\n", jobs[0].ID)
	bufio.NewScanner(os.Stdin).Scan() // the test says go once it has paused and resumed us
	_, err = cl.Complete(ctx, jobs[0].ID, jobs[0].LeaseToken, []byte(`"done"`))
	var pe *idemclient.Error
	switch {
	case err == nil:
		fmt.Println("complete 200")
	case errors.As(err, &pe):
		fmt.Printf("complete %d\n", pe.Status)
	default:
		fmt.Printf("complete %v\n", err)
	}
	return 0
}

// TestPausedPullWorkerIsFenced: a pull worker process holding a lease is
// stopped with SIGSTOP; the server's rescuer takes the job back, another
// worker claims and completes it (with the same result). Resumed with
// SIGCONT, the paused worker's completion is refused with 409 (lease lost),
// and the job shows one lost attempt and one completion: the completion
// happened exactly once.
func TestPausedPullWorkerIsFenced(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{start: true,
		clientCfg: &idem.Config{RescueInterval: 50 * time.Millisecond, PollInterval: 20 * time.Millisecond}})
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "pause", "max_attempts": 3})

	cmd, stdin, stdout := dbtest.StartChild(t, pausedWorkerEnv+"=1", "IDEM_URL="+e.srv.URL, "IDEM_API_KEY="+e.keyA)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	lines := bufio.NewReader(stdout)
	// A read from the child fails (EOF) when the cleanup kills it, so no read hangs the test.
	if line, err := lines.ReadString('\n'); err != nil || line != "claimed "+id+"\n" {
		t.Fatalf("worker said %q (%v)", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	cl, err := idemclient.New(e.srv.URL, &idemclient.Config{APIKey: e.keyA})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"pause"}, WorkerID: "second", Wait: 20 * time.Second})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("claim after the rescue: %v %v", jobs, err)
	}
	if _, err := cl.Complete(ctx, id, jobs[0].LeaseToken, []byte(`"done"`)); err != nil {
		t.Fatalf("second worker's completion: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	line, err := lines.ReadString('\n')
	if err != nil || line != "complete "+strconv.Itoa(409)+"\n" {
		t.Fatalf("the resumed worker's completion: %q (%v), want 409", line, err)
	}
	job, err := cl.GetJob(ctx, id)
	if err != nil || job.State != "completed" || string(job.Result) != `"done"` {
		t.Fatalf("job %+v (%v), want completed with the second worker's result", job, err)
	}
	atts, err := cl.Attempts(ctx, id)
	if err != nil || len(atts) != 2 || atts[0].Outcome != "lost" || atts[0].Worker != "paused" ||
		atts[1].Outcome != "completed" || atts[1].Worker != "second" {
		t.Fatalf("attempts %+v (%v), want the paused worker's lost attempt, then the second's completion", atts, err)
	}
}
