package idem_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// mpChildEnv makes the test binary act as one node of a PostgreSQL cluster
// (see TestMain): it works jobs until SIGTERM, logging every handler start
// as "job attempt node" to IDEM_MP_LOG.
const mpChildEnv = "IDEM_MP_CHILD"

// mpArgs are the args of the multi-process jobs.
type mpArgs struct {
	Seq       int    `json:"seq"`
	FailUntil int    `json:"fail_until,omitempty"` // fail while attempt < FailUntil
	Order     string `json:"order,omitempty"`      // tx-order: the row to write
}

func mpChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	url, schema, node := os.Getenv("IDEM_MP_URL"), os.Getenv("IDEM_MP_SCHEMA"), os.Getenv(mpChildEnv)
	pool, st := childPG(ctx, url, schema)
	if st == nil {
		return 2
	}
	defer pool.Close()
	defer st.Close()
	logf, err := os.OpenFile(os.Getenv("IDEM_MP_LOG"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return 2
	}
	logEvent := func(event string, j *idem.JobRow) error {
		_, err := fmt.Fprintf(logf, "%s %d %d %s\n", event, j.ID, j.Attempt, node)
		return err
	}
	logStart := func(j *idem.JobRow) error { return logEvent("S", j) }
	hold, goCh := childCommands()
	workers := idem.NewWorkers()
	workers.Handle("mp", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a mpArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		if err := logStart(j); err != nil {
			return nil, err
		}
		if hold.hold() {
			return nil, holdUntilKilled(ctx, j)
		}
		time.Sleep(time.Millisecond) // simulates work
		if j.Attempt < a.FailUntil {
			return nil, errors.New("planned failure")
		}
		// The end is logged before the completion commits, so a successor's
		// start must come after it in the log.
		return json.RawMessage(strconv.Itoa(a.Seq)), logEvent("E", j)
	})
	workers.Handle("shared", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		if err := logStart(j); err != nil {
			return nil, err
		}
		time.Sleep(time.Millisecond) // simulates work
		return json.RawMessage(strconv.Quote(node + ":" + strconv.FormatInt(j.ID, 10))), logEvent("E", j)
	})
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	workers.Handle("tx-order", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		if err := logStart(j); err != nil {
			return nil, err
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" (job_id) VALUES ($1)", j.ID); err != nil {
			return nil, err
		}
		if hold.hold() { // killed with the row written and not committed
			return nil, holdUntilKilled(ctx, j)
		}
		time.Sleep(time.Millisecond) // widen the window for a SIGKILL between write and commit
		if err := idem.JobCompleteTx(ctx, pgx.Tx(tx), nil); err != nil {
			return nil, err
		}
		return nil, tx.Commit(ctx)
	})
	client, err := idem.NewClient(st, &idem.Config{Workers: workers, WorkerID: node, Logger: quietLogger(),
		Queues: map[string]idem.QueueConfig{"mp": {MaxWorkers: 20}},
		// A 5 s lease (heartbeats every ~1.7 s): with 2 s, a surviving node
		// starved for 1.3 s by a loaded CI machine (-race, packages in
		// parallel) lost a lease now and then, which the strict lost-attempt
		// checks rightly count as a re-run outside the kill.
		LeaseDuration: 5 * time.Second, RescueInterval: 200 * time.Millisecond, LeaderTTL: 1500 * time.Millisecond,
		Retry: idem.RetryPolicy{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	if err := client.Start(ctx); err != nil {
		return 2
	}
	if rounds, _ := strconv.Atoi(os.Getenv("IDEM_MP_SHARED")); rounds > 0 {
		if err := enqueueShared(ctx, client, node, rounds, goCh); err != nil {
			fmt.Fprintln(os.Stderr, "shared:", err)
			return 2
		}
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 3
	}
	return 0
}

// mpCluster runs worker processes against one schema.
type mpCluster struct {
	t       *testing.T
	url     string
	schema  string
	logPath string
	pool    *pgxpool.Pool
	procs   map[string]*exec.Cmd
	stdin   map[string]io.WriteCloser
	stdout  map[string]*bufio.Reader
}

func (c *mpCluster) start(node string, env ...string) {
	c.t.Helper()
	// application_name lets kill find the node's server sessions (and only
	// this cluster's: other tests run nodes of the same names).
	url := c.url + "&application_name=" + c.appName(node)
	if !strings.Contains(c.url, "?") {
		url = c.url + "?application_name=" + c.appName(node)
	}
	cmd, stdin, stdout := dbtest.StartChild(c.t, append([]string{mpChildEnv + "=" + node, "IDEM_MP_URL=" + url,
		"IDEM_MP_SCHEMA=" + c.schema, "IDEM_MP_LOG=" + c.logPath}, env...)...)
	c.procs[node] = cmd
	c.stdin[node], c.stdout[node] = stdin, bufio.NewReader(stdout)
}

// appName is the application_name of node's server sessions.
func (c *mpCluster) appName(node string) string { return c.schema + "." + node }

// expectLine reads node's next stdout line, failing unless it is want
// (a killed node's closed pipe ends the read).
func (c *mpCluster) expectLine(node, want string) {
	c.t.Helper()
	line, err := c.stdout[node].ReadString('\n')
	if err != nil || strings.TrimSpace(line) != want {
		c.t.Fatalf("%s said %q (%v), want %q", node, line, err, want)
	}
}

func (c *mpCluster) kill(node string) {
	c.t.Helper()
	p := c.procs[node]
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill %s: %v", node, err)
	}
	_ = p.Wait()
	delete(c.procs, node)
	c.endSessions(node)
}

// holdThenKill kills node once it holds a handler (its after-th handler
// start from now on; hold_test.go) and returns the jobs it held.
func (c *mpCluster) holdThenKill(node string, after int) map[int64]int64 {
	c.t.Helper()
	return holdThenKill(c.t, after, c.stdin[node], c.stdout[node], func() { c.kill(node) })
}

// checkHeld proves that the jobs held (in their handler) by killed nodes
// were running on them at the kill and ran again: a later attempt started
// and is the job's last.
func checkHeld(t *testing.T, pool *pgxpool.Pool, c *mpCluster, held map[int64]int64, running map[int64]int) {
	t.Helper()
	starts := c.starts()
	for id, attempt := range held {
		if running[id] == 0 {
			t.Fatalf("job %d was held by a killed node but not running on it", id)
		}
		var last int64
		if err := pool.QueryRow(context.Background(), "SELECT attempt FROM "+pgx.Identifier{c.schema, "jobs"}.Sanitize()+
			" WHERE id = $1", id).Scan(&last); err != nil {
			t.Fatal(err)
		}
		if starts[[2]int64{id, attempt}] != 1 || last <= attempt || starts[[2]int64{id, last}] != 1 {
			t.Fatalf("job %d held in attempt %d (started %d times): last attempt %d started %d times",
				id, attempt, starts[[2]int64{id, attempt}], last, starts[[2]int64{id, last}])
		}
	}
}

// endSessions terminates the server sessions of a killed node and waits
// until they are gone: a statement the node sent before it died (a claim, a
// commit) is then either done or undone, so what the test reads next is
// final for that node.
func (c *mpCluster) endSessions(node string) {
	c.t.Helper()
	pool := c.pool
	rows, err := pool.Query(context.Background(), "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity WHERE application_name = $1", c.appName(node))
	if err != nil {
		c.t.Fatalf("end sessions of %s: %v", node, err)
	}
	// false means the session was gone before the call could signal it.
	if _, err := pgx.CollectRows(rows, pgx.RowTo[bool]); err != nil {
		c.t.Fatalf("end sessions of %s: %v", node, err)
	}
}

// stopAll SIGTERMs every node and checks each exits cleanly.
func (c *mpCluster) stopAll() {
	for node, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				c.t.Errorf("node %s exited with %v", node, err)
			}
		case <-time.After(30 * time.Second):
			_ = p.Process.Kill()
			c.t.Errorf("node %s did not stop on SIGTERM", node)
		}
		delete(c.procs, node)
	}
}

// logEvent is one line of the handler log.
type logEvent struct {
	kind    string // S (start) or E (end, before the completion commits)
	job     int64
	attempt int64
}

// events reads the handler log in append order.
func (c *mpCluster) events() []logEvent {
	c.t.Helper()
	f, err := os.Open(c.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	var out []logEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			c.t.Fatalf("log line %q", sc.Text())
		}
		id, _ := strconv.ParseInt(fields[1], 10, 64)
		att, _ := strconv.ParseInt(fields[2], 10, 64)
		out = append(out, logEvent{kind: fields[0], job: id, attempt: att})
	}
	return out
}

// starts counts handler starts per (job, attempt).
func (c *mpCluster) starts() map[[2]int64]int {
	out := map[[2]int64]int{}
	for _, e := range c.events() {
		if e.kind == "S" {
			out[[2]int64{e.job, e.attempt}]++
		}
	}
	return out
}

func newCluster(t *testing.T) (*mpCluster, *bundle, *pgxpool.Pool) {
	b, pool, schema := pgSetup(t, nil)
	url := pool.Config().ConnString()
	c := &mpCluster{t: t, url: url, schema: schema, logPath: t.TempDir() + "/starts.log", pool: pool, procs: map[string]*exec.Cmd{},
		stdin: map[string]io.WriteCloser{}, stdout: map[string]*bufio.Reader{}}
	t.Cleanup(func() {
		for _, p := range c.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	return c, b, pool
}

func countState(t *testing.T, pool *pgxpool.Pool, schema string, state idem.JobState) int {
	var n int
	err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "jobs"}.Sanitize()+" WHERE state = $1", string(state)).Scan(&n)
	if err != nil {
		t.Fatalf("count %s: %v", state, err)
	}
	return n
}

func leaderOf(t *testing.T, pool *pgxpool.Pool, schema string) string {
	var owner string
	err := pool.QueryRow(context.Background(), "SELECT owner FROM "+pgx.Identifier{schema, "leaders"}.Sanitize()+" WHERE expires_at > now() LIMIT 1").Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatalf("leader: %v", err)
	}
	return owner
}

// TestMultiProcessPostgres: three processes work 10,000 jobs on one database
// (partitioned, keyed, failing-then-retrying); the leader is SIGKILLed mid-run.
// Every attempt runs once, FIFO holds across processes, a new leader takes
// over, and its rescuer finishes the dead node's jobs. (20,000 jobs until
// the twenty-third session: the three race-instrumented processes took two
// minutes of CI's twenty; the races it looks for happen at every claim, so
// the number of claims matters less than that they overlap.)
func TestMultiProcessPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, b, pool := newCluster(t)
	const n = 10000
	var items []idem.EnqueueParams
	for i := range n {
		a := mpArgs{Seq: i}
		opts := &idem.EnqueueOpts{Queue: "mp", MaxAttempts: 5}
		switch i % 10 {
		case 0, 1:
			opts.PartitionKey = fmt.Sprintf("entity-%d", i%50)
			if i%200 == 0 {
				a.FailUntil = 2 // a failing head: its successors wait through its retry
			}
		case 2, 3:
			opts.IdempotencyKey = fmt.Sprintf("mp-key-%d", i)
		case 4:
			a.FailUntil = 2
		}
		args, _ := json.Marshal(a)
		items = append(items, idem.EnqueueParams{Kind: "mp", Args: args, Opts: opts})
	}
	all := enqueueChunks(t, b.client, items)
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		c.start(node)
	}
	// The nodes claim oldest first, so the unpartitioned job a fifth of the
	// way in finished means about a fifth of the work is done (partitions
	// run one job at a time and lag behind); a leader leads by then, and
	// every node is busy.
	waitAll(t, b.client, all[n/5+2:n/5+3], 120*time.Second) // i%10 == 2: unpartitioned
	leader := leaderOf(t, pool, c.schema)
	if leader == "" {
		t.Fatal("no leader with a third of the jobs done")
	}
	// Kill the leader while it holds a handler in flight (its next handler
	// start blocks until the kill), so the kill loses started work the new
	// leader must rescue.
	held := c.holdThenKill(leader, 1)
	runningAtKill := runningOn(t, pool, c.schema, leader)
	t.Logf("killed leader %s with %d jobs completed, %d running on it", leader,
		countState(t, pool, c.schema, idem.StateCompleted), len(runningAtKill))
	// The killed leader's running jobs finish only once a new leader rescues
	// them, so every job finished also proves a new election.
	waitAll(t, b.client, all, 300*time.Second)
	if got := countState(t, pool, c.schema, idem.StateCompleted); got != n {
		t.Fatalf("%d of %d jobs completed", got, n)
	}
	if l := leaderOf(t, pool, c.schema); l == leader {
		t.Fatalf("the killed node %s still leads", leader)
	}
	c.stopAll()

	starts := c.starts()
	for key, cnt := range starts {
		if cnt != 1 {
			t.Fatalf("job %d attempt %d started %d times", key[0], key[1], cnt)
		}
	}
	checkPartitionOrder(t, pool, c)
	checkLostAttempts(t, pool, c.schema, runningAtKill)
	checkEveryJobStarted(t, pool, c)
	lostAt := map[int64]int{}
	for id := range runningAtKill {
		lostAt[id] = 1
	}
	checkHeld(t, pool, c, held, lostAt)
	// Every result is the job's seq, and jobs that failed on purpose ran
	// their planned attempts.
	var wrong, unretried int
	if err := pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE result::text IS DISTINCT FROM args->>'seq'),"+
		" count(*) FILTER (WHERE (args->>'fail_until')::int = 2 AND attempt < 2) FROM "+
		pgx.Identifier{c.schema, "jobs"}.Sanitize()).Scan(&wrong, &unretried); err != nil || wrong != 0 || unretried != 0 {
		t.Fatalf("%d jobs with a wrong result, %d planned failures not retried (%v)", wrong, unretried, err)
	}
}

// runningOn returns the jobs a node holds a lease on: read right after the
// node is killed, the only jobs that may lose an attempt to that kill.
func runningOn(t *testing.T, pool *pgxpool.Pool, schema, node string) map[int64]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT id FROM "+pgx.Identifier{schema, "jobs"}.Sanitize()+
		" WHERE state = 'running' AND worker_id = $1", node)
	if err != nil {
		t.Fatalf("running on %s: %v", node, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("running on %s: %v", node, err)
	}
	out := map[int64]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// runningAttemptsOn returns the running jobs of node with their attempt numbers.
func runningAttemptsOn(t *testing.T, pool *pgxpool.Pool, schema, node string) map[int64]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT id, attempt FROM "+pgx.Identifier{schema, "jobs"}.Sanitize()+
		" WHERE state = 'running' AND worker_id = $1", node)
	if err != nil {
		t.Fatalf("running on %s: %v", node, err)
	}
	out := map[int64]int{}
	var id int64
	var attempt int
	if _, err := pgx.ForEachRow(rows, []any{&id, &attempt}, func() error { out[id] = attempt; return nil }); err != nil {
		t.Fatalf("running on %s: %v", node, err)
	}
	return out
}

// checkLostAttempts bounds re-runs after kills: lost (rescued) attempts
// belong only to jobs that were running on a killed node, exactly one per
// kill that caught the job running, and some kill caught a job running.
// lostAt maps a job to the number of kills it was running at.
func checkLostAttempts[V bool | int](t *testing.T, pool *pgxpool.Pool, schema string, lostAt map[int64]V) {
	t.Helper()
	want := map[int64]int{}
	for id, v := range lostAt {
		switch v := any(v).(type) {
		case bool:
			if v {
				want[id] = 1
			}
		case int:
			want[id] = v
		}
	}
	if len(want) == 0 {
		t.Fatal("no job was running on a killed node")
	}
	rows, err := pool.Query(context.Background(), "SELECT job_id, count(*) FILTER (WHERE outcome = 'lost' AND error = $1)::int,"+
		" count(*) FILTER (WHERE outcome = 'lost')::int FROM "+pgx.Identifier{schema, "attempts"}.Sanitize()+
		" GROUP BY job_id HAVING count(*) FILTER (WHERE outcome = 'lost') > 0", store.RescuedError)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for rows.Next() {
		var id int64
		var rescued, lost int
		if err := rows.Scan(&id, &rescued, &lost); err != nil {
			t.Fatal(err)
		}
		if rescued != lost {
			t.Fatalf("job %d: %d lost attempts, %d with the rescue error", id, lost, rescued)
		}
		got[id] = lost
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// kill ended the node's server sessions before the running set was
	// read, so that set is final: each of its jobs is rescued once per kill.
	for id, n := range got {
		if n != want[id] {
			t.Fatalf("job %d lost %d attempts, was running at %d kills", id, n, want[id])
		}
	}
	for id, n := range want {
		if got[id] != n {
			t.Fatalf("job %d was running at %d kills but lost %d attempts", id, n, got[id])
		}
	}
}

// checkEveryJobStarted proves from the handler log that every job's final
// attempt started its handler.
func checkEveryJobStarted(t *testing.T, pool *pgxpool.Pool, c *mpCluster) {
	t.Helper()
	starts := c.starts()
	rows, err := pool.Query(context.Background(), "SELECT id, attempt FROM "+pgx.Identifier{c.schema, "jobs"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, attempt int64
		if err := rows.Scan(&id, &attempt); err != nil {
			t.Fatal(err)
		}
		if starts[[2]int64{id, attempt}] != 1 {
			t.Fatalf("job %d: final attempt %d started %d times", id, attempt, starts[[2]int64{id, attempt}])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// checkPartitionOrder proves FIFO across processes from the handler log: in
// each partition, a job's first start comes after the end of its
// predecessor's final attempt (logged before that completion committed).
func checkPartitionOrder(t *testing.T, pool *pgxpool.Pool, c *mpCluster) {
	t.Helper()
	firstStart, endAt := map[int64]int{}, map[[2]int64]int{}
	for i, e := range c.events() {
		switch e.kind {
		case "S":
			if _, ok := firstStart[e.job]; !ok {
				firstStart[e.job] = i
			}
		case "E":
			endAt[[2]int64{e.job, e.attempt}] = i
		}
	}
	rows, err := pool.Query(context.Background(), "SELECT partition_key, id, attempt FROM "+
		pgx.Identifier{c.schema, "jobs"}.Sanitize()+" WHERE partition_key <> '' ORDER BY partition_key, id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prevPart string
	var prev [2]int64
	checked := 0
	for rows.Next() {
		var part string
		var id, attempt int64
		if err := rows.Scan(&part, &id, &attempt); err != nil {
			t.Fatal(err)
		}
		if part == prevPart {
			end, ok := endAt[prev]
			if !ok || firstStart[id] < end {
				t.Fatalf("partition %s: job %d started (log line %d) before job %d ended (line %d, logged %v)",
					part, id, firstStart[id], prev[0], end, ok)
			}
			checked++
		}
		prevPart, prev = part, [2]int64{id, attempt}
	}
	if checked == 0 {
		t.Fatal("no partitioned jobs checked")
	}
}

// TestTransactionalCompletionSurvivesSIGKILL: handlers write a row and
// complete their job in one transaction while nodes are SIGKILLed again and
// again; at the end every job is completed with exactly one row, and no row
// exists without its completed job.
func TestTransactionalCompletionSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, b, pool := newCluster(t)
	orders := pgx.Identifier{c.schema, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (job_id bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	items := make([]idem.EnqueueParams, n)
	for i := range items {
		items[i] = idem.EnqueueParams{Kind: "tx-order", Opts: &idem.EnqueueOpts{Queue: "mp", MaxAttempts: 25}}
	}
	all := enqueueChunks(t, b.client, items)
	c.start("node-a")
	c.start("node-b")
	runningAtKills := map[int64]int{} // job → attempts that a kill caught running on the killed node
	killedAttempts := map[int64]map[int]bool{}
	held := map[int64]int64{}
	for round := range 4 {
		// Each kill comes once the node holds a handler between its row
		// insert and its commit: from its 200th handler start after the
		// command on (two nodes share 3000 jobs; 4 kills fit).
		node := []string{"node-a", "node-b"}[round%2]
		for id, attempt := range c.holdThenKill(node, 200) {
			held[id] = attempt
		}
		// A job still marked running from an earlier kill of the same node
		// (its lease not yet rescued) is the same lost attempt: count
		// attempts, not kills.
		for id, attempt := range runningAttemptsOn(t, pool, c.schema, node) {
			if killedAttempts[id] == nil {
				killedAttempts[id] = map[int]bool{}
			}
			if !killedAttempts[id][attempt] {
				killedAttempts[id][attempt] = true
				runningAtKills[id]++
			}
		}
		c.start(node)
	}
	waitAll(t, b.client, all, 300*time.Second)
	if got := countState(t, pool, c.schema, idem.StateCompleted); got != n {
		t.Fatalf("%d of %d jobs completed", got, n)
	}
	c.stopAll()
	var bad int
	err := pool.QueryRow(ctx, `
SELECT count(*) FROM `+pgx.Identifier{c.schema, "jobs"}.Sanitize()+` j
WHERE (SELECT count(*) FROM `+orders+` o WHERE o.job_id = j.id) <> 1`).Scan(&bad)
	if err != nil || bad != 0 {
		t.Fatalf("%d jobs without exactly one committed row (%v)", bad, err)
	}
	var orphans int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+orders+" o WHERE NOT EXISTS (SELECT 1 FROM "+
		pgx.Identifier{c.schema, "jobs"}.Sanitize()+" j WHERE j.id = o.job_id AND j.state = 'completed')").Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d rows without a completed job (%v)", orphans, err)
	}
	checkLostAttempts(t, pool, c.schema, runningAtKills)
	checkEveryJobStarted(t, pool, c)
	checkHeld(t, pool, c, held, runningAtKills)
	starts := c.starts()
	reran := 0
	for _, cnt := range starts {
		if cnt > 1 {
			t.Fatalf("an attempt started %d times", cnt)
		}
	}
	for key := range starts {
		if key[1] > 1 {
			reran++
		}
	}
	t.Logf("%d attempts after the first (rescued from killed nodes); every effect committed exactly once", reran)
}

// sharedKeys is how many idempotency keys the nodes of
// TestSharedKeysAcrossProcesses contend for.
const sharedKeys = 40

// enqueueShared is a node's part of TestSharedKeysAcrossProcesses: it says
// "ready", waits for "go" on stdin (the test's start barrier across the
// processes), enqueues every shared key rounds times with dedup window 0 in
// this node's own order (node-a ascending, node-b descending, others
// shuffled), and says "shared done".
func enqueueShared(ctx context.Context, client *idem.Client, node string, rounds int, goCh <-chan struct{}) error {
	fmt.Println("ready")
	select {
	case <-goCh:
	case <-ctx.Done():
		return errors.New("no go from the test")
	}
	zero := time.Duration(0)
	r := rand.New(rand.NewPCG(uint64(len(node)), uint64(node[len(node)-1])))
	for range rounds {
		order := r.Perm(sharedKeys)
		switch node {
		case "node-a":
			slices.Sort(order)
		case "node-b":
			slices.Sort(order)
			slices.Reverse(order)
		}
		for _, k := range order {
			_, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "shared", Opts: &idem.EnqueueOpts{Queue: "mp",
				IdempotencyKey: fmt.Sprintf("shared-%02d", k), DedupWindow: &zero}})
			if err != nil {
				return err
			}
		}
	}
	fmt.Println("shared done")
	return nil
}

// TestSharedKeysAcrossProcesses: three processes enqueue and work the same
// 40 keys with dedup window 0 (a key admits a new job once its last one
// finished), each in its own key order, 2 rounds each. Overlap: the
// processes start enqueuing together on a barrier (each says "ready" and
// waits for the test's "go"), and each works the others' jobs while it
// enqueues. Every job completes; each key's handler ran exactly once, and
// every job of the key carries that run's result (later ones from the
// cache).
func TestSharedKeysAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, b, pool := newCluster(t)
	nodes := []string{"node-a", "node-b", "node-c"}
	began := time.Now()
	for _, node := range nodes {
		c.start(node, "IDEM_MP_SHARED=2")
	}
	for _, node := range nodes {
		c.expectLine(node, "ready")
	}
	for _, node := range nodes {
		if _, err := io.WriteString(c.stdin[node], "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range nodes {
		c.expectLine(node, "shared done")
	}
	t.Logf("enqueued by %s", time.Since(began))
	rows, err := pool.Query(ctx, "SELECT id FROM "+pgx.Identifier{c.schema, "jobs"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	jobs := waitAll(t, b.client, all, 120*time.Second)
	t.Logf("all finished by %s", time.Since(began))
	c.stopAll()
	ran := map[int64]int{} // job → handler runs that ended
	for _, e := range c.events() {
		if e.kind == "E" {
			ran[e.job]++
		}
	}
	byKey := map[string][]*idem.JobRow{}
	for _, j := range jobs {
		if j.State != idem.StateCompleted {
			t.Fatalf("job %d (%s) ended %s", j.ID, j.IdempotencyKey, j.State)
		}
		byKey[j.IdempotencyKey] = append(byKey[j.IdempotencyKey], j)
	}
	if len(byKey) != sharedKeys {
		t.Fatalf("%d keys, want %d", len(byKey), sharedKeys)
	}
	many := 0
	for key, js := range byKey {
		runs := 0
		for _, j := range js {
			runs += ran[j.ID]
			if string(j.Result) != string(js[0].Result) {
				t.Fatalf("key %s: job %d result %s, job %d result %s", key, j.ID, j.Result, js[0].ID, js[0].Result)
			}
		}
		if runs != 1 {
			t.Fatalf("key %s: the handler ran %d times over %d jobs, want once", key, runs, len(js))
		}
		if len(js) > 1 {
			many++
		}
	}
	if many == 0 {
		t.Fatal("no key got a second job: the window-0 keys never met a finished job")
	}
	t.Logf("%d jobs over %d keys (%d keys with more than one job)", len(jobs), sharedKeys, many)
}
