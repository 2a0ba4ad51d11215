package idem_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// sqlMPChildEnv makes the test binary a worker process on a shared SQLite
// file (see TestMain): IDEM_SQLMP_DB names the file, the variable's value
// the node (its WorkerID).
const sqlMPChildEnv = "IDEM_SQLMP_CHILD"

// sqlMPSharedKeys is how many idempotency keys every node enqueues at once.
const sqlMPSharedKeys = 60

// sqlMPBatch is the size of the keyed batches the nodes enqueue.
const sqlMPBatch = 25

// sqlMPChild works "sq" jobs of the shared file until SIGTERM, logging
// "S|E job attempt node" lines to IDEM_SQLMP_LOG. It says "ready", waits for
// "go" on stdin, enqueues the shared keys, says "shared done", then enqueues
// keyed batches of sqlMPBatch jobs ("b-<node>-<i>-<k>") until the file
// IDEM_SQLMP_DB+".stop" exists, and says "batches done".
func sqlMPChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	node := os.Getenv(sqlMPChildEnv)
	if os.Getenv("IDEM_SQLMP_OPENRACE") != "" {
		return sqlMPOpenRace(ctx, node)
	}
	st, err := sqlitestore.Open(ctx, os.Getenv("IDEM_SQLMP_DB"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer st.Close()
	logf, err := os.OpenFile(os.Getenv("IDEM_SQLMP_LOG"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "log:", err)
		return 2
	}
	logEvent := func(event string, j *idem.JobRow) error {
		_, err := fmt.Fprintf(logf, "%s %d %d %s\n", event, j.ID, j.Attempt, node)
		return err
	}
	hold, goCh := childCommands()
	workers := idem.NewWorkers()
	workers.Handle("sq", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		if err := logEvent("S", j); err != nil {
			return nil, err
		}
		if hold.hold() {
			return nil, holdUntilKilled(ctx, j)
		}
		time.Sleep(time.Millisecond) // simulates work
		return json.RawMessage(strconv.FormatInt(j.ID, 10)), logEvent("E", j)
	})
	client, err := idem.NewClient(st, &idem.Config{Workers: workers, WorkerID: node, Logger: quietLogger(),
		Queues: queues(8), LeaseDuration: 3 * time.Second, RescueInterval: 100 * time.Millisecond,
		LeaderTTL: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	if os.Getenv("IDEM_SQLMP_ACK") != "" {
		return sqlMPAck(ctx, client)
	}
	if os.Getenv("IDEM_SQLMP_DO") != "" {
		return sqlMPDo(ctx, client, node, logf)
	}
	if os.Getenv("IDEM_SQLMP_TX") != "" {
		return sqlMPHeldTx(ctx, st, client)
	}
	if err := client.Start(ctx); err != nil {
		return 2
	}
	if err := sqlMPEnqueue(ctx, client, node, goCh); err != nil {
		fmt.Fprintln(os.Stderr, node, "enqueue:", err)
		return 2
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 3
	}
	return 0
}

// sqlMPEnqueue is sqlMPChild's enqueuing, after its start.
func sqlMPEnqueue(ctx context.Context, client *idem.Client, node string, goCh <-chan struct{}) error {
	fmt.Println("ready")
	select {
	case <-goCh:
	case <-ctx.Done():
		return errors.New("no go from the test")
	}
	for k := range sqlMPSharedKeys {
		key := fmt.Sprintf("shared-%02d", k)
		if node == "node-b" {
			key = fmt.Sprintf("shared-%02d", sqlMPSharedKeys-1-k)
		}
		if _, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: key}}); err != nil {
			return err
		}
	}
	fmt.Println("shared done")
	stopFile := os.Getenv("IDEM_SQLMP_DB") + ".stop"
	for i := 0; ; i++ {
		if _, err := os.Stat(stopFile); err == nil {
			break
		}
		items := make([]idem.EnqueueParams, sqlMPBatch)
		for k := range items {
			items[k] = idem.EnqueueParams{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: fmt.Sprintf("b-%s-%d-%d", node, i, k)}}
		}
		if _, err := client.EnqueueMany(ctx, items); err != nil {
			return err
		}
	}
	fmt.Println("batches done")
	return nil
}

// sqlMPOpenRace waits for a line on stdin, then opens the file (new: every
// node opens it at once), enqueues the key "race" and one of its own, and
// says "ok" (or the error).
func sqlMPOpenRace(ctx context.Context, node string) int {
	bufio.NewScanner(os.Stdin).Scan()
	st, err := sqlitestore.Open(ctx, os.Getenv("IDEM_SQLMP_DB"), nil)
	if err != nil {
		fmt.Println("open:", err)
		return 0
	}
	defer st.Close()
	client, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()})
	if err == nil {
		_, err = client.EnqueueMany(ctx, []idem.EnqueueParams{{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: "race"}},
			{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: node}}})
	}
	if err != nil {
		fmt.Println("enqueue:", err)
		return 0
	}
	fmt.Println("ok")
	return 0
}

// TestSQLiteNewFileOpenedByProcessesAtOnce: four processes open one new
// file at the same moment (creating it, switching it to WAL, migrating it)
// and enqueue the same key: every one succeeds and the key has one job.
func TestSQLiteNewFileOpenedByProcessesAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "new.db")
	const n = 4
	nodes := make([]*sqlMPNode, n)
	for i := range nodes {
		nodes[i] = startSQLMPNode(t, db, fmt.Sprintf("node-%d", i), "IDEM_SQLMP_OPENRACE=1")
	}
	for _, node := range nodes {
		if _, err := io.WriteString(node.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	for i, node := range nodes {
		if line, err := node.stdout.ReadString('\n'); err != nil || line != "ok\n" {
			t.Fatalf("node-%d: %q (%v)", i, line, err)
		}
	}
	st, client := openSQLiteClient(t, db)
	defer st.Close()
	if jobs := listAll(t, client); len(jobs) != n+1 {
		t.Fatalf("%d jobs, want %d", len(jobs), n+1)
	}
}

// sqlMPHeldTx enqueues 50 keyed jobs ("tx-<i>") and writes a table row in
// one WriteTx, says "in tx" and waits, inside the transaction, until the
// process is killed.
func sqlMPHeldTx(ctx context.Context, st *sqlitestore.Store, client *idem.Client) int {
	err := st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES ('held')"); err != nil {
			return err
		}
		items := make([]idem.EnqueueParams, 50)
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: fmt.Sprintf("tx-%d", i)}}
		}
		if _, err := idem.EnqueueTx(ctx, client, tx, items); err != nil {
			return err
		}
		fmt.Println("in tx")
		var b [1]byte
		_, _ = os.Stdin.Read(b[:]) // until killed
		return errors.New("not killed")
	})
	fmt.Println("tx:", err)
	return 2
}

// TestSQLiteKilledInWriteTx SIGKILLs a process inside a WriteTx that has
// written a row of the application's table and enqueued 50 keyed jobs,
// while this process waits to write: the write goes through after the
// kill, none of the killed transaction's writes are in the file, the file
// passes SQLite's integrity check and the same keys can be enqueued again.
func TestSQLiteKilledInWriteTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "tx.db")
	st, client := openSQLiteClient(t, db)
	defer st.Close()
	err := st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE orders (id text PRIMARY KEY)")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	txer := startSQLMPNode(t, db, "txer", "IDEM_SQLMP_TX=1", "IDEM_SQLMP_LOG="+filepath.Join(dir, "events.log"))
	defer txer.stdin.Close()
	if line, err := txer.stdout.ReadString('\n'); err != nil || line != "in tx\n" {
		t.Fatalf("child: %q (%v)", line, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: "after"}})
		done <- err
	}()
	txer.kill(t)
	if err := <-done; err != nil {
		t.Fatalf("enqueue while the killed process held the write lock: %v", err)
	}
	if jobs := listAll(t, client); len(jobs) != 1 || jobs[0].IdempotencyKey != "after" {
		t.Fatalf("%d jobs after the kill, want only the one enqueued here", len(jobs))
	}
	sdb, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var check string
	var orders int
	if err := sdb.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity check: %q (%v)", check, err)
	}
	if err := sdb.QueryRow("SELECT count(*) FROM orders").Scan(&orders); err != nil || orders != 0 {
		t.Fatalf("orders: %d (%v), want 0", orders, err)
	}
	res, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: "tx-7"}})
	if err != nil || res.Existing {
		t.Fatalf("key tx-7 after the killed transaction: %+v (%v)", res, err)
	}
}

// sqlMPDo calls Do on the key "do-key" (lease 300 ms, waiting up to a
// minute for another holder), logging "run <node>" when its fn runs; with
// IDEM_SQLMP_DO=block the fn says "in do" and blocks until the process is
// killed. It prints the result Do returned.
func sqlMPDo(ctx context.Context, client *idem.Client, node string, logf *os.File) int {
	res, err := client.Do(ctx, "do-key", func(ctx context.Context) (any, error) {
		if _, err := fmt.Fprintf(logf, "run %s\n", node); err != nil {
			return nil, err
		}
		if os.Getenv("IDEM_SQLMP_DO") == "block" {
			fmt.Println("in do")
			var b [1]byte
			_, _ = os.Stdin.Read(b[:]) // until killed
		}
		return node, nil
	}, &idem.DoOpts{Lease: 300 * time.Millisecond, Wait: time.Minute})
	if err != nil {
		fmt.Println("do:", err)
		return 0
	}
	fmt.Println("result", string(res.Result))
	return 0
}

// TestSQLiteDoHolderKilled: a process holding a Do key (its fn running)
// is SIGKILLed while two other processes wait for the key: once its lease
// lapses exactly one of them runs fn, and both return that run's result.
func TestSQLiteDoHolderKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, logPath := filepath.Join(dir, "do.db"), filepath.Join(dir, "runs.log")
	enqueueBacklog(t, db, 0)
	start := func(node, mode string) *sqlMPNode {
		return startSQLMPNode(t, db, node, "IDEM_SQLMP_DO="+mode, "IDEM_SQLMP_LOG="+logPath)
	}
	holder := start("holder", "block")
	defer holder.stdin.Close()
	if line, err := holder.stdout.ReadString('\n'); err != nil || line != "in do\n" {
		t.Fatalf("holder: %q (%v)", line, err)
	}
	nodeB, nodeC := start("node-b", "run"), start("node-c", "run")
	holder.kill(t)
	lineB, errB := nodeB.stdout.ReadString('\n')
	lineC, errC := nodeC.stdout.ReadString('\n')
	if errB != nil || errC != nil || lineB != lineC || !strings.HasPrefix(lineB, "result ") {
		t.Fatalf("node-b said %q (%v), node-c said %q (%v): want the same result", lineB, errB, lineC, errC)
	}
	runs, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(runs)), "\n")
	if len(lines) != 2 || lines[0] != "run holder" {
		t.Fatalf("fn runs %q: want the holder's, then one more", lines)
	}
	if want := fmt.Sprintf("result %q\n", strings.TrimPrefix(lines[1], "run ")); lineB != want {
		t.Fatalf("result %q, but the run after the kill was %q", lineB, lines[1])
	}
}

// sqlMPAck enqueues keyed jobs from four goroutines (one by one) and one
// more (batches of 10) without end, printing "ack <key>" once each enqueue
// has returned, until the process is killed.
func sqlMPAck(ctx context.Context, client *idem.Client) int {
	var mu sync.Mutex
	ack := func(keys ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			fmt.Println("ack", k)
		}
	}
	errs := make(chan error, 5)
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("one-%d-%d", g, i)
				if _, err := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: key}}); err != nil {
					errs <- err
					return
				}
				ack(key)
			}
		}()
	}
	go func() {
		for i := 0; ; i++ {
			items := make([]idem.EnqueueParams, 10)
			keys := make([]string, len(items))
			for k := range items {
				keys[k] = fmt.Sprintf("many-%d-%d", i, k)
				items[k] = idem.EnqueueParams{Kind: "sq", Opts: &idem.EnqueueOpts{IdempotencyKey: keys[k]}}
			}
			if _, err := client.EnqueueMany(ctx, items); err != nil {
				errs <- err
				return
			}
			ack(keys...)
		}
	}()
	fmt.Fprintln(os.Stderr, "ack:", <-errs)
	return 2
}

// TestSQLiteAckedEnqueueSurvivesSIGKILL SIGKILLs a process that enqueues
// from five goroutines right after it reported 500 acknowledged keys, then
// opens the file again: every acknowledged key has its job, and every
// batch is in whole or not at all.
func TestSQLiteAckedEnqueueSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ack.db")
	enqueueBacklog(t, db, 1) // the schema exists before the child opens the file
	acker := startSQLMPNode(t, db, "acker", "IDEM_SQLMP_ACK=1", "IDEM_SQLMP_LOG="+filepath.Join(dir, "events.log"))
	sc := bufio.NewScanner(acker.stdout)
	var acked []string
	readAcks := func(upTo int) { // the keys of "ack <key>" lines until upTo or the end
		for len(acked) < upTo && sc.Scan() {
			if key, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				acked = append(acked, key)
			}
		}
	}
	readAcks(500)
	acker.kill(t)
	readAcks(math.MaxInt) // acknowledged before the kill, still in the pipe
	if len(acked) < 500 {
		t.Fatalf("the child acknowledged %d keys, want 500", len(acked))
	}
	st, client := openSQLiteClient(t, db)
	defer st.Close()
	jobs := listAll(t, client)
	have := map[string]bool{}
	batches := map[string]int{}
	for _, j := range jobs {
		have[j.IdempotencyKey] = true
		if b, ok := strings.CutPrefix(j.IdempotencyKey, "many-"); ok {
			batches[b[:strings.IndexByte(b, '-')]]++
		}
	}
	for _, key := range acked {
		if !have[key] {
			t.Fatalf("acknowledged key %s has no job after the kill (%d jobs)", key, len(jobs))
		}
	}
	for b, n := range batches {
		if n != 10 {
			t.Fatalf("batch %s has %d of its 10 jobs", b, n)
		}
	}
	t.Logf("%d acknowledged, %d jobs after the kill", len(acked), len(jobs))
}

// sqlMPNode is one worker process of a shared-file test.
type sqlMPNode struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

// startSQLMPNode starts the child process node (see sqlMPChild) on the file
// at db, with env added to its environment; it is killed at the test's end.
func startSQLMPNode(t *testing.T, db, node string, env ...string) *sqlMPNode {
	t.Helper()
	cmd, stdin, stdout := dbtest.StartChild(t, append([]string{sqlMPChildEnv + "=" + node, "IDEM_SQLMP_DB=" + db}, env...)...)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &sqlMPNode{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout)}
}

// kill SIGKILLs the node and waits for it to end.
func (n *sqlMPNode) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = n.cmd.Wait()
}

func (n *sqlMPNode) expect(t *testing.T, want string) {
	t.Helper()
	line, err := n.stdout.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != want {
		t.Fatalf("node said %q (%v), want %q", line, err, want)
	}
}

// TestSQLiteSharedFileSIGKILL: three worker processes share one SQLite file
// with a backlog; each enqueues the same idempotency keys at the same
// moment, then keyed batches without pause (the writers of three processes
// contend for the file: before the write gate, a busy writer starved the
// others past their busy timeout under -race — failed enqueues "database
// is locked", heartbeats too, so leases of live nodes lapsed and their
// jobs were rescued). The maintenance leader is SIGKILLed while it
// holds a handler (and may be enqueuing a batch). Every job completes;
// each shared key has one job; each batch is in whole or not at all; a job
// ran once unless it was running on the killed node, in which case it has
// exactly one lost attempt (rescued by a newly elected leader) then a
// completed one; the held jobs ran again.
func TestSQLiteSharedFileSIGKILL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, logPath := filepath.Join(dir, "shared.db"), filepath.Join(dir, "events.log")
	// The backlog goes in through a Store closed before the nodes start, so
	// that a node holds the file's process lock and its key filter, which
	// other nodes' keys bypass.
	enqueueBacklog(t, db, 1000)
	nodes := map[string]*sqlMPNode{}
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		nodes[node] = startSQLMPNode(t, db, node, "IDEM_SQLMP_LOG="+logPath)
	}
	for _, n := range nodes {
		n.expect(t, "ready")
	}
	st, client := openSQLiteClient(t, db)
	defer st.Close()
	for _, n := range nodes {
		if _, err := io.WriteString(n.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		n.expect(t, "shared done")
	}
	// The maintenance leader is killed: the others must elect a new one,
	// whose rescuer frees the killed node's jobs.
	victim := leaderNode(t, db, nodes)
	a := nodes[victim]
	held := holdThenKill(t, 30, a.stdin, a.stdout, func() { a.kill(t) })
	delete(nodes, victim)
	if err := os.WriteFile(db+".stop", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		n.expect(t, "batches done")
	}

	all := listAll(t, client)
	ids := make([]int64, len(all))
	for i, j := range all {
		ids[i] = j.ID
	}
	jobs := waitAll(t, client, ids, 120*time.Second)
	for _, n := range nodes {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		if err := n.cmd.Wait(); err != nil {
			t.Errorf("a surviving node exited with %v", err)
		}
	}

	starts := map[int64]int{}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev, node string
		var id, attempt int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d %s", &ev, &id, &attempt, &node); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if ev == "S" {
			starts[id]++
		}
	}
	byKey := map[string]int{}
	batchSize := map[string]int{}
	lost := 0
	for _, j := range jobs {
		if j.State != idem.StateCompleted || string(j.Result) != strconv.FormatInt(j.ID, 10) {
			t.Fatalf("job %d (%q): state %s result %s", j.ID, j.IdempotencyKey, j.State, j.Result)
		}
		if j.IdempotencyKey != "" {
			byKey[j.IdempotencyKey]++
			if strings.HasPrefix(j.IdempotencyKey, "b-") {
				batchSize[j.IdempotencyKey[:strings.LastIndexByte(j.IdempotencyKey, '-')]]++
			}
		}
		attempts, err := client.JobAttempts(ctx, "", j.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(attempts) == 1 && starts[j.ID] == 1 && j.Attempt == 1 && attempts[0].Outcome == "completed":
		case len(attempts) == 2 && starts[j.ID] <= 2 && j.Attempt == 2 && attempts[0].Outcome == "lost" &&
			attempts[0].Error == store.RescuedError && attempts[0].WorkerID == victim && attempts[1].Outcome == "completed":
			lost++
		default:
			t.Fatalf("job %d: %d starts, attempt %d: %s", j.ID, starts[j.ID], j.Attempt, describeAttempts(attempts))
		}
	}
	for id := range held {
		if starts[id] != 2 {
			t.Fatalf("job %d was held at the kill but started %d times", id, starts[id])
		}
	}
	for k := range sqlMPSharedKeys {
		if key := fmt.Sprintf("shared-%02d", k); byKey[key] != 1 {
			t.Fatalf("key %s has %d jobs, want 1", key, byKey[key])
		}
	}
	for key, n := range byKey {
		if n != 1 {
			t.Fatalf("key %s has %d jobs", key, n)
		}
	}
	for b, n := range batchSize {
		if n != sqlMPBatch {
			t.Fatalf("batch %s has %d of its %d jobs", b, n, sqlMPBatch)
		}
	}
	if lost == 0 {
		t.Fatal("no job of the killed leader was rescued")
	}
	t.Logf("%d jobs; %d rescued after the kill of the leader %s", len(jobs), lost, victim)
}

// leaderNode polls the leaders table of the file at db until one of nodes
// holds every leader row, and returns it.
func leaderNode(t *testing.T, db string, nodes map[string]*sqlMPNode) string {
	t.Helper()
	sdb, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		var owner string
		var n int
		err := sdb.QueryRow("SELECT min(owner), count(DISTINCT owner) FROM leaders").Scan(&owner, &n)
		if err == nil && n == 1 && nodes[owner] != nil {
			return owner
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node leads (%v)", err)
		}
		<-time.After(10 * time.Millisecond) // poll
	}
}

// enqueueBacklog enqueues n plain "sq" jobs into the file at db and closes it.
func enqueueBacklog(t *testing.T, db string, n int) {
	t.Helper()
	st, client := openSQLiteClient(t, db)
	defer st.Close()
	items := make([]idem.EnqueueParams, n)
	for i := range items {
		items[i] = idem.EnqueueParams{Kind: "sq"}
	}
	enqueueChunks(t, client, items)
}

// openSQLiteClient opens the file at db and a client (no workers) on it;
// closing the store is the caller's.
func openSQLiteClient(t *testing.T, db string) (*sqlitestore.Store, *idem.Client) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return st, client
}

// listAll lists every job of the store.
func listAll(t *testing.T, c *idem.Client) []*idem.JobRow {
	t.Helper()
	var out []*idem.JobRow
	p := &idem.JobListParams{Limit: 500}
	for {
		rows, next, err := c.JobListAll(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
		if next == 0 {
			return out
		}
		p.Cursor = next
	}
}
