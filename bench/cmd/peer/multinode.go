package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
)

// The multi-node scenario (issue 14 item 5) runs the real idem binary:
// `go build ./cmd/idem` into a temp directory, then N processes of its
// hidden `idem bench-node` command — the runtime of `idem serve` with its
// configuration defaults and IDEM_* variables, without the HTTP server,
// working the bench queue with Go handlers — on one fresh schema.
//
//   - throughput: for each node count, a backlog of MNJobs no-op jobs is
//     enqueued into a paused queue; once every node printed "ready" the
//     queue is resumed and the clock runs until the database shows every job
//     completed.
//   - leader kill: three nodes work 1-second sleep jobs; once the
//     maintenance leader holds running jobs it gets SIGKILL, and the tool
//     times, on the database, the election of a new leader and the rescue
//     of every job that was running on the killed node.

// node is one running `idem bench-node` process.
type node struct {
	name     string
	cmd      *exec.Cmd
	stderr   *os.File
	ready    chan struct{}
	settings string
	exited   chan struct{}
}

// multinodeResult is the outcome of the scenario.
type multinodeResult struct {
	rates    map[int]float64
	perNode  map[int]string
	settings string
	kill     *killResult
}

// killResult is the outcome of the leader-kill measurement.
type killResult struct {
	leader        string
	runningAtKill int
	newLeader     string
	electedAfter  time.Duration
	rescuedAfter  time.Duration
}

// buildIdem builds ./cmd/idem of the idem module into dir and returns the
// binary's path.
func buildIdem(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/idem-dev/idem").Output()
	if err != nil {
		return "", fmt.Errorf("locate the idem module: %w", err)
	}
	src := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "idem")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/idem")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/idem in %s: %w\n%s", src, err, out)
	}
	return bin, nil
}

// nodeURL returns the URL the nodes use: o.URL with pool_max_conns set, so
// that three nodes fit in max_connections.
func (h *harness) nodeURL() (string, error) {
	u, err := url.Parse(h.o.URL)
	if err != nil {
		return "", fmt.Errorf("parse url: %w", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(h.o.MNNodeConns))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// nodeEnv is the environment of the nodes: this one plus the settings
// flags (empty: idem serve's defaults).
func (h *harness) nodeEnv() []string {
	env := os.Environ()
	for k, v := range map[string]string{
		"IDEM_JOBS_LEASE":                  h.o.MNLease,
		"IDEM_MAINTENANCE_RESCUE_INTERVAL": h.o.MNRescueInterval,
		"IDEM_MAINTENANCE_LEADER_TTL":      h.o.MNLeaderTTL,
	} {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// startNode starts one bench-node process.
func (h *harness) startNode(bin, dir, dbURL, schema, name string) (*node, error) {
	errf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "bench-node", "--database", dbURL, "--schema", schema,
		"--workers", strconv.Itoa(h.o.Workers), "--name", name, "--queue", benchQueue)
	cmd.Env = h.nodeEnv()
	cmd.Stderr = errf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		errf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		errf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	n := &node{name: name, cmd: cmd, stderr: errf, ready: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if s, ok := strings.CutPrefix(line, "settings "); ok {
				n.settings = s
			}
			if strings.HasPrefix(line, "ready ") {
				close(n.ready)
			}
		}
		_ = cmd.Wait()
		close(n.exited)
	}()
	return n, nil
}

// waitReady waits until every node printed "ready".
func waitReady(ctx context.Context, nodes []*node) error {
	timeout := time.After(2 * time.Minute)
	for _, n := range nodes {
		select {
		case <-n.ready:
		case <-n.exited:
			return fmt.Errorf("node %s exited before it was ready: %s", n.name, tail(n.stderr.Name()))
		case <-timeout:
			return fmt.Errorf("node %s not ready after 2 minutes", n.name)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *node) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// stop sends SIGTERM, then SIGKILL after grace.
func (n *node) stop(grace time.Duration) {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(grace):
		n.kill()
	}
	n.stderr.Close()
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-5):], []byte("\n")))
}

// multinode runs the throughput measurement for each node count and the
// leader kill.
func (h *harness) multinode(ctx context.Context) (*multinodeResult, error) {
	dir, err := os.MkdirTemp("", "idem-peer-mn-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	h.logf("multinode: go build ./cmd/idem …")
	bin, err := buildIdem(ctx, dir)
	if err != nil {
		return nil, err
	}
	dbURL, err := h.nodeURL()
	if err != nil {
		return nil, err
	}
	res := &multinodeResult{rates: map[int]float64{}, perNode: map[int]string{}}
	for _, k := range h.o.nodeCounts() {
		h.logf("multinode: %d node(s), %s jobs …", k, count(h.o.MNJobs))
		rate, per, settings, err := h.measureNodes(ctx, bin, dir, dbURL, k)
		if err != nil {
			return nil, fmt.Errorf("%d nodes: %w", k, err)
		}
		res.rates[k], res.perNode[k], res.settings = rate, per, settings
	}
	if h.o.MNKill {
		h.logf("multinode: SIGKILL of the leader among 3 nodes …")
		if res.kill, err = h.measureKill(ctx, bin, dir, dbURL); err != nil {
			return nil, fmt.Errorf("leader kill: %w", err)
		}
	}
	return res, nil
}

// mnSchema creates and migrates a fresh schema and returns it with an idem
// client (no workers) on a small pool, for enqueues and pauses.
func (h *harness) mnSchema(ctx context.Context) (schema string, c *idem.Client, closeFn func(), err error) {
	schema = h.schemaName("mn")
	cfg, err := pgxpool.ParseConfig(h.o.URL)
	if err != nil {
		return "", nil, nil, err
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", nil, nil, err
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		pool.Close()
		h.dropSchema(schema)
		return "", nil, nil, fmt.Errorf("idem store: %w", err)
	}
	c, err = idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
	if err != nil {
		st.Close()
		pool.Close()
		h.dropSchema(schema)
		return "", nil, nil, err
	}
	return schema, c, func() { st.Close(); pool.Close(); h.dropSchema(schema) }, nil
}

// enqueueKind enqueues n jobs of kind with args in batches of 1,000.
func enqueueKind(ctx context.Context, c *idem.Client, n int, kind string, args []byte) error {
	for from := 0; from < n; from += idem.MaxBatch {
		items := make([]idem.EnqueueParams, min(idem.MaxBatch, n-from))
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: kind, Args: args, Opts: &idem.EnqueueOpts{Queue: benchQueue}}
		}
		if _, err := c.EnqueueMany(ctx, items); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	return nil
}

// measureNodes works MNJobs no-op jobs with k nodes and returns jobs/s, the
// share of each node and the nodes' settings.
func (h *harness) measureNodes(ctx context.Context, bin, dir, dbURL string, k int) (rate float64, per, settings string, err error) {
	schema, c, closeFn, err := h.mnSchema(ctx)
	if err != nil {
		return 0, "", "", err
	}
	defer closeFn()
	if err := c.QueuePause(ctx, benchQueue, ""); err != nil {
		return 0, "", "", fmt.Errorf("pause: %w", err)
	}
	if err := enqueueKind(ctx, c, h.o.MNJobs, "noop", nil); err != nil {
		return 0, "", "", err
	}
	if err := h.settle(ctx, schema); err != nil {
		return 0, "", "", err
	}
	var nodes []*node
	defer func() {
		for _, n := range nodes {
			n.stop(10 * time.Second)
		}
	}()
	for i := range k {
		n, err := h.startNode(bin, dir, dbURL, schema, fmt.Sprintf("node-%d", i+1))
		if err != nil {
			return 0, "", "", err
		}
		nodes = append(nodes, n)
	}
	if err := waitReady(ctx, nodes); err != nil {
		return 0, "", "", err
	}
	settings = nodes[0].settings
	wctx, cancel := context.WithTimeout(ctx, h.o.Timeout)
	defer cancel()
	start := time.Now()
	if err := c.QueueResume(wctx, benchQueue, ""); err != nil {
		return 0, "", "", fmt.Errorf("resume: %w", err)
	}
	jobs := pgx.Identifier{schema, "jobs"}.Sanitize()
	if err := h.pollUntil(wctx, 20*time.Millisecond, func() (bool, error) {
		var done int
		err := h.admin.QueryRow(wctx, "SELECT count(*) FROM "+jobs+" WHERE state = 'completed'").Scan(&done)
		return done >= h.o.MNJobs, err
	}); err != nil {
		return 0, "", "", fmt.Errorf("wait for completions: %w", err)
	}
	rate = float64(h.o.MNJobs) / time.Since(start).Seconds()
	rows, err := h.admin.Query(ctx, "SELECT worker_id, count(*) FROM "+jobs+" GROUP BY 1 ORDER BY 1")
	if err != nil {
		return 0, "", "", err
	}
	var parts []string
	var name string
	var cnt int
	if _, err := pgx.ForEachRow(rows, []any{&name, &cnt}, func() error {
		parts = append(parts, fmt.Sprintf("%s %s", name, count(cnt)))
		return nil
	}); err != nil {
		return 0, "", "", err
	}
	return rate, strings.Join(parts, ", "), settings, nil
}

// pollUntil calls done every interval until it reports true.
func (h *harness) pollUntil(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// measureKill starts three nodes on 1-second sleep jobs, SIGKILLs the
// maintenance leader while it holds running jobs and times the election of
// a new leader and the rescue of the killed node's jobs.
func (h *harness) measureKill(ctx context.Context, bin, dir, dbURL string) (*killResult, error) {
	schema, c, closeFn, err := h.mnSchema(ctx)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	// Enough 1 s jobs to keep 3 × Workers busy for two minutes.
	if err := enqueueKind(ctx, c, 3*h.o.Workers*120, "sleep", []byte(`{"ms":1000}`)); err != nil {
		return nil, err
	}
	var nodes []*node
	defer func() {
		for _, n := range nodes {
			n.kill()
			n.stderr.Close()
		}
	}()
	for i := range 3 {
		n, err := h.startNode(bin, dir, dbURL, schema, fmt.Sprintf("node-%d", i+1))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if err := waitReady(ctx, nodes); err != nil {
		return nil, err
	}
	leaders := pgx.Identifier{schema, "leaders"}.Sanitize()
	jobs := pgx.Identifier{schema, "jobs"}.Sanitize()
	leaderNow := func(ctx context.Context) (string, error) {
		var owner string
		err := h.admin.QueryRow(ctx, "SELECT owner FROM "+leaders+" WHERE name = 'maintenance' AND expires_at > now()").Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil
		}
		return owner, err
	}
	// A leader with running jobs: the nodes run jobs nearly all the time,
	// so this is a short bounded poll of the database.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var leader string
	if err := h.pollUntil(wctx, 50*time.Millisecond, func() (bool, error) {
		l, err := leaderNow(wctx)
		if err != nil || l == "" {
			return false, err
		}
		var running int
		err = h.admin.QueryRow(wctx, "SELECT count(*) FROM "+jobs+" WHERE state = 'running' AND worker_id = $1", l).Scan(&running)
		leader = l
		return running > 0, err
	}); err != nil {
		return nil, fmt.Errorf("wait for a leader with running jobs: %w", err)
	}
	var victim *node
	for _, n := range nodes {
		if n.name == leader {
			victim = n
		}
	}
	if victim == nil {
		return nil, fmt.Errorf("leader %q is none of the nodes", leader)
	}
	killedAt := time.Now()
	victim.kill()
	rows, err := h.admin.Query(wctx, "SELECT id FROM "+jobs+" WHERE state = 'running' AND worker_id = $1", leader)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	res := &killResult{leader: leader, runningAtKill: len(ids)}
	h.logf("multinode: killed leader %s holding %d running jobs; waiting for the rescue …", leader, len(ids))
	if err := h.pollUntil(wctx, 50*time.Millisecond, func() (bool, error) {
		if res.newLeader == "" {
			l, err := leaderNow(wctx)
			if err != nil {
				return false, err
			}
			if l != "" && l != leader {
				res.newLeader, res.electedAfter = l, time.Since(killedAt)
			}
		}
		var stuck int
		err := h.admin.QueryRow(wctx, "SELECT count(*) FROM "+jobs+" WHERE id = ANY($1) AND state = 'running' AND worker_id = $2",
			ids, leader).Scan(&stuck)
		if err != nil {
			return false, err
		}
		if stuck == 0 && res.rescuedAfter == 0 {
			res.rescuedAfter = time.Since(killedAt)
		}
		return res.rescuedAfter > 0 && res.newLeader != "", nil
	}); err != nil {
		return nil, fmt.Errorf("wait for the rescue (new leader %q after %s): %w", res.newLeader, res.electedAfter, err)
	}
	return res, nil
}

// printMultinode prints the scenario's table.
func printMultinode(w io.Writer, o *options, r *multinodeResult) {
	src := "idem serve's defaults"
	if o.MNLease != "" || o.MNRescueInterval != "" || o.MNLeaderTTL != "" {
		src = "set by --mn-lease/--mn-rescue-interval/--mn-leader-ttl"
	}
	fmt.Fprintf(w, "\nmulti-node: idem bench-node processes (idem serve's runtime and configuration, no HTTP server), %d workers each, pool_max_conns %d, one PostgreSQL; settings (%s): %s\n\n",
		o.Workers, o.MNNodeConns, src, r.settings)
	fmt.Fprintln(w, "| nodes | jobs/s (total) | vs 1 node | jobs per node |")
	fmt.Fprintln(w, "|---:|---:|---:|---|")
	one := r.rates[1]
	for _, k := range o.nodeCounts() {
		scale := "n/a"
		if one > 0 {
			scale = fmt.Sprintf("%.2f×", r.rates[k]/one)
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s |\n", k, count(int(r.rates[k]+0.5)), scale, r.perNode[k])
	}
	if k := r.kill; k != nil {
		fmt.Fprintf(w, "\nSIGKILL of the maintenance leader %s holding %d running jobs (3 nodes, 1 s jobs):\n\n", k.leader, k.runningAtKill)
		fmt.Fprintln(w, "| after the SIGKILL | seconds |")
		fmt.Fprintln(w, "|---|---:|")
		fmt.Fprintf(w, "| new leader elected (%s) | %.1f |\n", k.newLeader, k.electedAfter.Seconds())
		fmt.Fprintf(w, "| every job of the killed leader rescued (no longer running on it) | %.1f |\n", k.rescuedAfter.Seconds())
	}
}
