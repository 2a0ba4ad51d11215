package idem_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// pauseChildEnv makes the test binary a worker process that the test pauses
// with SIGSTOP (see TestMain). Its handler writes an order row in its own
// transaction, prints "ready <job id>", waits for a line on stdin, then
// completes the job with JobCompleteTx in that transaction and prints
// "complete lease-lost" or "complete <error>".
const pauseChildEnv = "IDEM_PAUSE_CHILD"

// pauseChild is the paused worker process.
func pauseChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	schema := os.Getenv(pauseChildEnv)
	pool, st := childPG(ctx, os.Getenv("IDEM_PAUSE_URL"), schema)
	if st == nil {
		return 2
	}
	defer pool.Close()
	defer st.Close()
	in := bufio.NewScanner(os.Stdin)
	workers := idem.NewWorkers()
	workers.Handle("pause", orderHandler(pool, schema, "paused", func(id int64) {
		fmt.Printf("ready %d\n", id)
		in.Scan() // the test says go once it has paused and resumed us
	}, func(err error) {
		if errors.Is(err, idem.ErrLeaseLost) {
			fmt.Println("complete lease-lost")
		} else {
			fmt.Printf("complete %v\n", err)
		}
	}))
	client, err := idem.NewClient(st, &idem.Config{Workers: workers, WorkerID: "paused", Logger: quietLogger(),
		Queues: map[string]idem.QueueConfig{"pause": {MaxWorkers: 1}}, LeaseDuration: time.Second, DisableMaintenance: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	if err := client.Start(ctx); err != nil {
		return 2
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = client.Stop(stopCtx)
	return 0
}

// orderHandler writes an order row for the job, marked node, and completes
// the job in the same transaction; between the two it calls between, and it
// reports JobCompleteTx's error to completed. The transaction ignores the
// handler's cancellation: these tests are of the fence in JobCompleteTx,
// which must hold even for a handler that goes on after losing its lease.
func orderHandler(pool *pgxpool.Pool, schema, node string, between func(id int64), completed func(error)) idem.HandlerFunc {
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	return func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		wctx := context.WithoutCancel(ctx)
		tx, err := pool.Begin(wctx)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback(wctx)
		if _, err := tx.Exec(wctx, "INSERT INTO "+orders+" (job_id, node) VALUES ($1, $2)", j.ID, node); err != nil {
			return nil, err
		}
		between(j.ID)
		// Every worker's result is the same, as a deterministic handler's
		// would be: only the lease token tells a late completion apart.
		err = idem.JobCompleteTx(wctx, pgx.Tx(tx), "done")
		completed(err)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(`"done"`), tx.Commit(wctx)
	}
}

// pausedProc is a worker process the test pauses, with its stdin and
// stdout lines.
type pausedProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// startPaused starts a paused-worker child with env.
func startPaused(t *testing.T, env ...string) *pausedProc {
	t.Helper()
	cmd, stdin, stdout := dbtest.StartChild(t, env...)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return &pausedProc{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
}

// line reads the child's next stdout line, failing after timeout.
func (p *pausedProc) line(t *testing.T, timeout time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if p.lines.Scan() {
			got <- p.lines.Text()
		}
		close(got)
	}()
	select {
	case l, ok := <-got:
		if !ok {
			t.Fatal("child closed its output")
		}
		return l
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		t.Fatalf("no line from the child in %s", timeout)
		return ""
	}
}

// signal sends sig to the child.
func (p *pausedProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// TestPausedWorkerCompletionIsFenced (PostgreSQL): a worker process has
// written its effect in a transaction when it is stopped with SIGSTOP; its
// lease lapses, another worker's rescuer takes the job back and that worker
// runs and completes it. Resumed with SIGCONT, the paused worker's
// JobCompleteTx fails with ErrLeaseLost, its transaction rolls back, and
// the effect exists exactly once: the second worker's.
func TestPausedWorkerCompletionIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool, schema := pgSetup(t, nil)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (job_id bigint NOT NULL, node text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "pause", Opts: &idem.EnqueueOpts{Queue: "pause"}})
	if err != nil {
		t.Fatal(err)
	}
	child := startPaused(t, pauseChildEnv+"="+schema, "IDEM_PAUSE_URL="+pool.Config().ConnString())
	if got, want := child.line(t, leaseTimeout), fmt.Sprintf("ready %d", res.Job.ID); got != want {
		t.Fatalf("child said %q, want %q", got, want)
	}
	child.signal(t, syscall.SIGSTOP) // no more heartbeats: the lease lapses

	// The second worker only starts now, so the job is the paused one's.
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	workers := idem.NewWorkers()
	workers.Handle("pause", orderHandler(pool, schema, "second", func(int64) {}, func(error) {}))
	second, err := idem.NewClient(st, &idem.Config{Workers: workers, WorkerID: "second", Logger: quietLogger(),
		Queues: map[string]idem.QueueConfig{"pause": {MaxWorkers: 1}}, LeaseDuration: time.Second,
		RescueInterval: fastRescue, LeaderTTL: time.Second, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = second.Stop(stopCtx)
	})
	waitCtx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	row, err := second.JobWait(waitCtx, res.Job.ID)
	if err != nil {
		t.Fatalf("wait for the second worker: %v", err)
	}

	child.signal(t, syscall.SIGCONT)
	if _, err := io.WriteString(child.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	if got := child.line(t, leaseTimeout); got != "complete lease-lost" {
		t.Fatalf("the resumed worker's JobCompleteTx: %q, want lease-lost", got)
	}
	rows, err := pool.Query(ctx, "SELECT node FROM "+orders+" WHERE job_id = $1", res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(nodes, ",") != "second" {
		t.Fatalf("order rows by %v, want exactly one, by the second worker", nodes)
	}
	attempts, err := second.JobAttempts(ctx, "", res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idem.StateCompleted || string(row.Result) != `"done"` || len(attempts) != 2 ||
		attempts[0].Outcome != "lost" || attempts[0].Error != store.RescuedError || attempts[1].Outcome != "completed" {
		t.Fatalf("job %s result %s, attempts %+v; want completed by the second worker after one lost attempt",
			row.State, row.Result, attempts)
	}
}
