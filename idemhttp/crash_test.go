package idemhttp_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMain doubles as a pull worker process for TestWorkerKilled: with
// IDEMHTTP_TEST_WORKER set, the test binary claims one job, prints its id
// and then hangs holding the lease until it is killed.
func TestMain(m *testing.M) {
	if os.Getenv("IDEMHTTP_TEST_WORKER") == "1" {
		os.Exit(runHangingWorker())
	}
	if os.Getenv(pausedWorkerEnv) == "1" {
		os.Exit(runPausedWorker())
	}
	goleak.VerifyTestMain(m)
}

func runHangingWorker() int {
	cl, err := idemclient.New(os.Getenv("IDEM_URL"), &idemclient.Config{APIKey: os.Getenv("IDEM_API_KEY")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	jobs, err := cl.Claim(context.Background(), &idemclient.ClaimRequest{Queues: []string{"crash"},
		WorkerID: "doomed", Lease: time.Second, Wait: 30 * time.Second})
	if err != nil || len(jobs) != 1 {
		fmt.Fprintln(os.Stderr, "claim:", err, len(jobs))
		return 2
	}
	fmt.Printf("claimed %s\n", jobs[0].ID)
	select {} // hold the lease until SIGKILL
}

// TestWorkerKilled: a pull worker process SIGKILLed while holding a lease;
// the server's rescuer makes the job retryable and another worker
// completes it.
func TestWorkerKilled(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{start: true,
		clientCfg: &idem.Config{RescueInterval: 100 * time.Millisecond, PollInterval: 50 * time.Millisecond}})
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "crash", "max_attempts": 3})

	cmd, _, out := dbtest.StartChild(t, "IDEMHTTP_TEST_WORKER=1", "IDEM_URL="+e.srv.URL, "IDEM_API_KEY="+e.keyA)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "claimed "+id {
		cmd.Process.Kill()
		t.Fatalf("worker said %q (%v)", line, err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()

	cl, err := idemclient.New(e.srv.URL, &idemclient.Config{APIKey: e.keyA})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"crash"}, WorkerID: "survivor", Wait: 20 * time.Second})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("rescued claim: %v %v", jobs, err)
	}
	if jobs[0].Attempt != 2 {
		t.Fatalf("attempt %d, want 2 (the lost lease counts)", jobs[0].Attempt)
	}
	done, err := cl.Complete(ctx, id, jobs[0].LeaseToken, []byte(`"ok"`))
	if err != nil || done.State != "completed" {
		t.Fatalf("complete: %v %v", done, err)
	}
	atts, err := cl.Attempts(ctx, id)
	if err != nil || len(atts) != 2 || atts[0].Outcome != "lost" || atts[0].Worker != "doomed" || atts[1].Outcome != "completed" {
		t.Fatalf("attempts %+v %v", atts, err)
	}
}
