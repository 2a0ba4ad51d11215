package idem_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// flowChildEnv makes the test binary a worker process of
// TestFlowControlThreeProcesses (see TestMain): it opens the store named by
// IDEM_FLOW_DB (a SQLite path) or IDEM_MP_URL and IDEM_MP_SCHEMA, starts a
// client with 8 workers of queue "flow" and answers "ready"; its handlers
// keep the shared ledger (IDEM_FLOW_LEDGER, see flowLedger). It stops at
// EOF on stdin.
const flowChildEnv = "IDEM_FLOW_CHILD"

// flowQueue is the queue of TestFlowControlThreeProcesses.
const flowQueue = "flow"

// flowEntry is one handler running, as the ledger has it.
type flowEntry struct {
	Pid     int    `json:"pid"`
	ID      int64  `json:"id"`
	Attempt int    `json:"attempt"`
	Tenant  string `json:"tenant"`
}

// flowLedger is the state the processes of TestFlowControlThreeProcesses
// share in a file under an exclusive flock: the handlers running (each
// handler adds itself after its claim committed and removes itself before
// it returns, so the ledger never holds more of a scope than the store
// counts running), the bounds a start must keep, and what was seen.
type flowLedger struct {
	Running []flowEntry `json:"running"`
	// Dead are the processes the test killed: their entries count while
	// the store still has that attempt running (their lease has not ended).
	Dead []int `json:"dead"`
	// Hold makes the handlers of that process block until it is killed.
	Hold int `json:"hold"`
	// QueueLimit binds starts claimed after ChangeAt (0 = no limit);
	// Lenient binds the others (the larger of the old and new limits, 0
	// = none).
	QueueLimit, Lenient int
	ChangeAt            time.Time
	TenantLimit         int
	// PausedTenant may start nothing claimed (StartedAt, the claim's
	// clock read before its statement) after PausedAt while Resuming is
	// false: the test sets Resuming before it resumes, so a handler that
	// still finds it false started from a claim that ran while the pause
	// held. (A claim's clock read before the resume does not say it ran
	// before it.)
	PausedTenant string
	PausedAt     time.Time
	Resuming     bool
	// The queue may start nothing claimed after QueuePausedAt while
	// QueueResuming is false.
	QueuePausedAt time.Time
	QueueResuming bool
	// What was seen: the most running at once (queue, one tenant), the
	// starts and the violations.
	MostQueue, MostTenant int
	// MostStrict is the most running at a start claimed after ChangeAt.
	MostStrict   int
	MostDead     int
	Starts, Done int
	// StartsBy counts the starts of each process (the test's own pid:
	// its pull workers over HTTP).
	StartsBy   map[int]int
	Violations []string
	// Events are the test's steps with their times (for a failure's report).
	Events []string
}

// withLedger runs f on the ledger at path under its lock and writes it back.
func withLedger(path string, f func(l *flowLedger) error) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open ledger lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock ledger: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	var l flowLedger
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read ledger: %w", err)
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("decode ledger: %w", err)
		}
	}
	if err := f(&l); err != nil {
		return err
	}
	if b, err = json.Marshal(&l); err != nil {
		return fmt.Errorf("encode ledger: %w", err)
	}
	// A new file renamed over the old one: a process killed while it
	// writes (the test SIGKILLs one) leaves the ledger as it was, not
	// truncated.
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		return fmt.Errorf("replace ledger: %w", err)
	}
	return nil
}

// flowStart adds job j to the ledger and checks the bounds. Entries of a
// killed process count while the store still has their attempt running:
// its slots must not come back before its leases end.
func flowStart(ctx context.Context, path string, c *idem.Client, j *idem.JobRow) (hold bool, err error) {
	err = withLedger(path, func(l *flowLedger) error {
		kept := l.Running[:0]
		dead := 0
		for _, e := range l.Running {
			if containsInt(l.Dead, e.Pid) {
				row, err := c.JobGet(ctx, e.Tenant, e.ID)
				if err != nil {
					return fmt.Errorf("job %d of a killed process: %w", e.ID, err)
				}
				if row.State != idem.StateRunning || row.Attempt != e.Attempt {
					continue
				}
				dead++
			}
			kept = append(kept, e)
		}
		l.Running = append(kept, flowEntry{Pid: os.Getpid(), ID: j.ID, Attempt: j.Attempt, Tenant: j.Tenant})
		l.Starts++
		if l.StartsBy == nil {
			l.StartsBy = map[int]int{}
		}
		l.StartsBy[os.Getpid()]++
		l.MostDead = max(l.MostDead, dead)
		tenant := 0
		for _, e := range l.Running {
			if e.Tenant == j.Tenant {
				tenant++
			}
		}
		total := len(l.Running)
		l.MostQueue = max(l.MostQueue, total)
		l.MostTenant = max(l.MostTenant, tenant)
		bound := l.Lenient
		if j.StartedAt != nil && j.StartedAt.After(l.ChangeAt) {
			bound = l.QueueLimit
			l.MostStrict = max(l.MostStrict, total)
		}
		if bound > 0 && total > bound {
			l.Violations = append(l.Violations, fmt.Sprintf("job %d (attempt %d, pid %d): %d running (%d of killed processes), queue limit %d",
				j.ID, j.Attempt, os.Getpid(), total, dead, bound))
		}
		if l.TenantLimit > 0 && tenant > l.TenantLimit {
			l.Violations = append(l.Violations, fmt.Sprintf("job %d: tenant %s has %d running, limit %d", j.ID, j.Tenant, tenant, l.TenantLimit))
		}
		if j.Tenant == l.PausedTenant && j.StartedAt != nil && j.StartedAt.After(l.PausedAt) && !l.Resuming {
			pauses, err := c.QueuePauseList(ctx)
			l.Violations = append(l.Violations, fmt.Sprintf("job %d (attempt %d, pid %d, worker %s) of paused tenant %s claimed at %v, paused at %v; pauses now %v %v",
				j.ID, j.Attempt, os.Getpid(), j.WorkerID, j.Tenant, j.StartedAt, l.PausedAt, pauses, err))
		}
		if !l.QueuePausedAt.IsZero() && j.StartedAt != nil && j.StartedAt.After(l.QueuePausedAt) && !l.QueueResuming {
			l.Violations = append(l.Violations, fmt.Sprintf("job %d (attempt %d, pid %d, worker %s) claimed at %v, queue paused at %v", j.ID, j.Attempt, os.Getpid(), j.WorkerID, j.StartedAt, l.QueuePausedAt))
		}
		hold = l.Hold == os.Getpid()
		return nil
	})
	return hold, err
}

// flowEnd takes job j out of the ledger.
func flowEnd(path string, j *idem.JobRow, done bool) error {
	return withLedger(path, func(l *flowLedger) error {
		for i, e := range l.Running {
			if e.ID == j.ID && e.Pid == os.Getpid() {
				l.Running = append(l.Running[:i], l.Running[i+1:]...)
				break
			}
		}
		if done {
			l.Done++
		}
		return nil
	})
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// flowHandler is the handler of the flow test's processes: it keeps the
// ledger (calling changed after each change), works a moment, and fails
// the first attempt of every seventh job (a retried job must count like
// any other).
func flowHandler(path string, c func() *idem.Client, changed func()) idem.WorkFunc[SendArgs] {
	return func(ctx context.Context, j *idem.Job[SendArgs]) (any, error) {
		hold, err := flowStart(ctx, path, c(), j.JobRow)
		if err != nil {
			return nil, idem.JobPermanent(err)
		}
		changed()
		if hold {
			<-ctx.Done() // until the process is killed
			return nil, ctx.Err()
		}
		time.Sleep(time.Duration(j.ID%3) * time.Millisecond) // simulates the work, not a synchronisation
		retry := j.Attempt == 1 && j.ID%7 == 0
		if err := flowEnd(path, j.JobRow, !retry); err != nil {
			return nil, idem.JobPermanent(err)
		}
		changed()
		if retry {
			return nil, idem.JobRetryAfter(time.Millisecond, errors.New("first attempt fails"))
		}
		return nil, nil
	}
}

func flowChild() int {
	ctx := context.Background()
	st, closeStore, ok := childStore(ctx, "IDEM_FLOW_DB")
	if !ok {
		return 2
	}
	defer closeStore()
	var client *idem.Client
	workers := idem.NewWorkers()
	// Each ledger change is told to the test on stdout ("ledger"), which
	// waits on it rather than polling the file.
	idem.AddWorker(workers, flowHandler(os.Getenv("IDEM_FLOW_LEDGER"), func() *idem.Client { return client },
		func() { fmt.Println("ledger") }))
	client, err := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues:       map[string]idem.QueueConfig{flowQueue: {MaxWorkers: 8}},
		PollInterval: 5 * time.Millisecond, DisableMaintenance: true, Logger: quietLogger(),
		LeaseDuration: 3 * time.Second, WorkerID: "flow" + os.Getenv(flowChildEnv)})
	if err == nil {
		err = client.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
	}
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = client.Stop(stop)
	return 0
}

// TestFlowControlThreeProcesses: three worker processes (the test binary
// run again, 8 workers each) work 3 tenants' jobs of one queue, on one
// SQLite file and on one PostgreSQL schema, under a queue concurrency that
// the test changes while they run (4, raised to 6, lowered to 2, removed,
// set to 3) and a default concurrency of 2 for every tenant. Meanwhile one
// tenant is paused and resumed, then the whole queue (until its running
// handlers have ended), and one process is SIGKILLed with
// handlers running: its jobs keep their slots until their leases end (the
// test's client rescues them) and then run again elsewhere. Every seventh
// job fails its first attempt, and a fifth of the jobs share FIFO
// partitions. Beside the processes, one pull worker per tenant claims over
// HTTP from the test's own server. The handlers keep a ledger under a file lock (flowLedger):
// no start ever exceeds a bound, and every job completes.
func TestFlowControlThreeProcesses(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			runFlowThreeProcesses(t, backend)
		})
	}
}

func runFlowThreeProcesses(t *testing.T, backend string) {
	const perTenant, procs, tenantLimit = 120, 3, 2
	tenants := []string{"acme", "beta", "gamma"}
	ctx := context.Background()
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.json")
	env := []string{"IDEM_FLOW_LEDGER=" + ledger}
	var st store.Store
	switch backend {
	case "sqlite":
		path := filepath.Join(dir, "idem.db")
		s, err := sqlitestore.Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		st, env = s, append(env, "IDEM_FLOW_DB="+path)
	case "postgres":
		url, schema := dbtest.NewSchema(t)
		st, env = parentPG(t, url, schema), append(env, "IDEM_MP_URL="+url, "IDEM_MP_SCHEMA="+schema)
	}
	// The test's client runs maintenance only: it rescues expired leases.
	c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), RescueInterval: 50 * time.Millisecond,
		LeaderTTL: time.Second, WorkerID: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = c.Stop(stop)
	})
	queueScope := idem.FlowScope{Queue: flowQueue}
	setLimit := func(limit, lenient int) {
		t.Helper()
		// Lenient first: claims in flight may still have seen the old limit.
		if err := withLedger(ledger, func(l *flowLedger) error {
			l.Lenient, l.ChangeAt = lenient, time.Now().Add(time.Hour)
			l.MostQueue = 0
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if limit == 0 {
			if err := c.LimitDelete(ctx, queueScope); err != nil {
				t.Fatal(err)
			}
		} else if _, err := c.LimitPut(ctx, idem.Limit{FlowScope: queueScope, Concurrency: limit}); err != nil {
			t.Fatal(err)
		}
		if err := withLedger(ledger, func(l *flowLedger) error {
			l.QueueLimit, l.ChangeAt = limit, time.Now()
			l.MostStrict = 0
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := withLedger(ledger, func(l *flowLedger) error { l.TenantLimit = tenantLimit; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LimitPut(ctx, idem.Limit{FlowScope: idem.FlowScope{Tenant: idem.EveryTenant}, Concurrency: tenantLimit}); err != nil {
		t.Fatal(err)
	}
	setLimit(4, 4)

	type proc struct {
		cmd  interface{ Wait() error }
		pid  int
		kill func()
	}
	var ps []proc
	ready := make(chan string, procs)
	// changed is signalled after each change of the ledger by a process or
	// a pull worker (waitFor rereads it then); one pending signal is enough.
	changed := make(chan struct{}, 1)
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for i := range procs {
		cmd, in, out := dbtest.StartChild(t, append([]string{flowChildEnv + "=" + strconv.Itoa(i)}, env...)...)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "ledger" {
					signal()
					continue
				}
				ready <- sc.Text()
			}
		}()
		t.Cleanup(func() {
			in.Close()
			_ = cmd.Wait()
		})
		ps = append(ps, proc{cmd: cmd, pid: cmd.Process.Pid, kill: func() { _ = cmd.Process.Kill() }})
	}
	for range procs {
		select {
		case l := <-ready:
			if l != "ready" {
				t.Fatalf("worker process said %q", l)
			}
		case <-time.After(waitTimeout):
			t.Fatal("worker processes not ready")
		}
	}

	var jobIDs []int64
	for _, tenant := range tenants {
		items := make([]idem.EnqueueParams, perTenant)
		for i := range items {
			o := &idem.EnqueueOpts{Tenant: tenant, Queue: flowQueue}
			if i%5 == 0 {
				o.PartitionKey = fmt.Sprint("p", i%3)
			}
			items[i] = idem.EnqueueParams{Kind: "send", Args: []byte(fmt.Sprintf(`{"n":%d}`, i)), Opts: o}
		}
		res, err := c.EnqueueMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		jobIDs = append(jobIDs, ids(res)...)
	}
	total := len(jobIDs)
	startFlowPullers(t, c, st, ledger, tenants, signal)
	deadline := time.Now().Add(2 * waitTimeout)
	read := func() flowLedger {
		t.Helper()
		var out flowLedger
		if err := withLedger(ledger, func(l *flowLedger) error { out = *l; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// waitFor reads the ledger again after each change until cond holds.
	waitFor := func(what string, cond func(l *flowLedger) bool) flowLedger {
		t.Helper()
		timeout := time.NewTimer(time.Until(deadline))
		defer timeout.Stop()
		for {
			l := read()
			if cond(&l) {
				return l
			}
			select {
			case <-changed:
			case <-timeout.C:
				l = read()
				t.Fatalf("%s: not after %v; ledger: starts %d, done %d, running %d, violations %q",
					what, 2*waitTimeout, l.Starts, l.Done, len(l.Running), l.Violations)
			}
		}
	}
	mark := func(event string) {
		t.Helper()
		if err := withLedger(ledger, func(l *flowLedger) error {
			l.Events = append(l.Events, fmt.Sprintf("%s at %s (done %d)", event, time.Now().UTC().Format("15:04:05.000000"), l.Done))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	doneAtLeast := func(n int) func(l *flowLedger) bool { return func(l *flowLedger) bool { return l.Done >= n } }
	type figure struct {
		phase               string
		most, strict, bound int
	}
	var figures []figure
	phase := func(name string, bound int) {
		l := read()
		figures = append(figures, figure{name, l.MostQueue, l.MostStrict, bound})
	}

	waitFor("40 done under 4", doneAtLeast(40))
	phase("limit 4", 4)
	setLimit(6, 6)
	waitFor("80 done under 6", doneAtLeast(80))
	phase("raised to 6", 6)
	setLimit(2, 6)
	// Pause gamma while claims are in flight.
	if err := withLedger(ledger, func(l *flowLedger) error {
		l.PausedTenant, l.PausedAt = "gamma", time.Now().Add(time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.QueuePause(ctx, flowQueue, "gamma"); err != nil {
		t.Fatal(err)
	}
	if err := withLedger(ledger, func(l *flowLedger) error { l.PausedAt = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	mark("gamma paused")
	waitFor("120 done under 2", doneAtLeast(120))
	phase("lowered to 2, gamma paused", 2)
	// Kill process 2 while it has handlers running.
	victim := ps[2]
	if err := withLedger(ledger, func(l *flowLedger) error { l.Hold = victim.pid; return nil }); err != nil {
		t.Fatal(err)
	}
	setLimit(3, 3)
	waitFor("the victim runs a handler", func(l *flowLedger) bool {
		for _, e := range l.Running {
			if e.Pid == victim.pid {
				return true
			}
		}
		return false
	})
	victim.kill()
	_ = victim.cmd.Wait()
	if err := withLedger(ledger, func(l *flowLedger) error { l.Dead = append(l.Dead, victim.pid); return nil }); err != nil {
		t.Fatal(err)
	}
	mark("victim killed")
	l := read()
	waitFor("200 done under 3 after a kill", doneAtLeast(l.Done+80))
	phase("3 with a killed process", 3)
	// Pause the whole queue: the running handlers end, nothing starts.
	if err := withLedger(ledger, func(l *flowLedger) error {
		l.QueuePausedAt = time.Now().Add(time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.QueuePause(ctx, flowQueue, ""); err != nil {
		t.Fatal(err)
	}
	if err := withLedger(ledger, func(l *flowLedger) error { l.QueuePausedAt = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	mark("queue paused")
	paused := waitFor("the paused queue's handlers end", func(l *flowLedger) bool {
		for _, e := range l.Running {
			if !containsInt(l.Dead, e.Pid) {
				return false
			}
		}
		return true
	})
	if err := withLedger(ledger, func(l *flowLedger) error { l.QueueResuming = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.QueueResume(ctx, flowQueue, ""); err != nil {
		t.Fatal(err)
	}
	mark("queue resumed")
	if pauses, err := c.QueuePauseList(ctx); err != nil || len(pauses) != 1 || pauses[0] != (idem.FlowScope{Tenant: "gamma", Queue: flowQueue}) {
		t.Errorf("after the queue's resume, paused: %v, %v; want gamma's work in %s", pauses, err, flowQueue)
	}
	waitFor("a start after the resume", func(l *flowLedger) bool { return l.Starts > paused.Starts })
	if err := withLedger(ledger, func(l *flowLedger) error { l.Resuming = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.QueueResume(ctx, flowQueue, "gamma"); err != nil {
		t.Fatal(err)
	}
	mark("gamma resumed")
	setLimit(0, 0)
	reported := false
	waitFor("every job done", func(l *flowLedger) bool {
		if l.Done >= total {
			return true
		}
		if time.Until(deadline) < 5*time.Second && !reported {
			reported = true
			// About to fail: say where the jobs left are.
			left := map[string]int{}
			for _, id := range jobIDs {
				for _, tenant := range tenants {
					if r, err := c.JobGet(ctx, tenant, id); err == nil && r.State != idem.StateCompleted {
						left[fmt.Sprintf("%s/%s/attempt %d/partition %q", tenant, r.State, r.Attempt, r.PartitionKey)]++
					}
				}
			}
			pauses, err := c.QueuePauseList(ctx)
			limits, lerr := c.LimitList(ctx, "")
			var ls []string
			for _, x := range limits {
				ls = append(ls, fmt.Sprintf("%+v", *x))
			}
			t.Logf("jobs not completed: %v; paused %v %v; limits %v %v", left, pauses, err, ls, lerr)
		}
		return false
	})
	phase("removed", 0)
	rows := waitAll(t, c, jobIDs, waitTimeout)
	for _, r := range rows {
		if r.State != idem.StateCompleted {
			t.Errorf("job %d: %s", r.ID, r.State)
		}
	}
	l = read()
	for _, v := range l.Violations {
		t.Error(v)
	}
	if len(l.Violations) > 0 {
		t.Logf("steps: %q", l.Events)
	}
	for _, f := range figures {
		t.Logf("%s: most running %d, %d at starts claimed after the change, limit %d (0 = none)", f.phase, f.most, f.strict, f.bound)
	}
	t.Logf("starts by process %v (the test's pull workers: pid %d; killed: %d)", l.StartsBy, os.Getpid(), victim.pid)
	t.Logf("%d jobs, %d starts, most of one tenant %d (limit %d), most of the killed process's counted %d",
		total, l.Starts, l.MostTenant, tenantLimit, l.MostDead)
}
