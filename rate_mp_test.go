package idem_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// rateChildEnv makes the test binary a worker process of
// TestRateLimitThreeProcesses (see TestMain). Its store comes from
// IDEM_RATE_DB (a SQLite path) or IDEM_MP_URL and IDEM_MP_SCHEMA. It reads
// one time per line on stdin and sets its clock to it; after the first it
// starts a client (10 workers, the acme limit of 5 per minute) and answers
// "ready"; each job it runs is a line "ran <id>". It stops at EOF.
const rateChildEnv = "IDEM_RATE_CHILD"

// rateLimit and defaultRate are the limits every process of the test
// configures: acme's own, and the default of every other tenant (each
// with its own budget of the same rate).
var (
	rateLimit   = idem.Limit{FlowScope: idem.FlowScope{Tenant: "acme"}, Rate: 5, Period: time.Minute}
	defaultRate = idem.Limit{FlowScope: idem.FlowScope{Tenant: "*"}, Rate: 5, Period: time.Minute}
)

// rateTenants enqueue the jobs of TestRateLimitThreeProcesses: acme under
// its own limit, the others under the default.
var rateTenants = []string{"acme", "beta", "gamma"}

// ownRates gives every tenant of rateTenants a limit of its own at
// rateLimit's rate, and no default: on PostgreSQL the processes then spend
// rate budget they reserve in slices (pgstore claim_reserved.go) instead of
// locking the limits on every claim (IDEM_RATE_OWN).
func ownRates() []idem.Limit {
	var out []idem.Limit
	for _, t := range rateTenants {
		l := rateLimit
		l.Tenant = t
		out = append(out, l)
	}
	return out
}

// startRateProcs starts n worker processes (startRateProc) with their
// clocks at now and waits until each said "ready" on lines.
func startRateProcs(t *testing.T, env []string, n int, lines chan string, now time.Time) []*rateProc {
	t.Helper()
	var ps []*rateProc
	for i := range n {
		p := startRateProc(t, env, i, lines)
		p.setTime(t, now)
		ps = append(ps, p)
	}
	deadline := time.After(waitTimeout)
	for ready := 0; ready < n; {
		select {
		case l := <-lines:
			if l != "ready" {
				t.Fatalf("worker process said %q before ready", l)
			}
			ready++
		case <-deadline:
			t.Fatalf("%d of %d worker processes ready", ready, n)
		}
	}
	return ps
}

func rateChild() int {
	ctx := context.Background()
	st, closeStore, ok := childStore(ctx, "IDEM_RATE_DB")
	if !ok {
		return 2
	}
	defer closeStore()
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	clock := &fakeClock{}
	in := bufio.NewScanner(os.Stdin)
	var client *idem.Client
	for in.Scan() {
		now, err := time.Parse(time.RFC3339Nano, in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, "time:", err)
			return 2
		}
		clock.mu.Lock()
		clock.now = now
		clock.mu.Unlock()
		if client != nil {
			continue
		}
		workers := idem.NewWorkers()
		idem.AddWorker(workers, idem.WorkFunc[SendArgs](func(ctx context.Context, j *idem.Job[SendArgs]) (any, error) {
			say("ran %d", j.ID)
			return nil, nil
		}))
		limits := []idem.Limit{rateLimit, defaultRate}
		if os.Getenv("IDEM_RATE_OWN") != "" {
			limits = ownRates()
		}
		client, err = idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(10), Now: clock.Now,
			PollInterval: 5 * time.Millisecond, DisableMaintenance: true, Logger: quietLogger(),
			WorkerID: "proc" + os.Getenv(rateChildEnv), Limits: limits})
		if err == nil {
			err = client.Start(ctx)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			return 2
		}
		say("ready")
	}
	if client != nil {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stop)
	}
	return 0
}

// rateProc is one worker process of TestRateLimitThreeProcesses.
type rateProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
}

// startRateProc starts process n; its output lines go to lines.
func startRateProc(t *testing.T, env []string, n int, lines chan<- string) *rateProc {
	t.Helper()
	cmd, in, out := dbtest.StartChild(t, append([]string{fmt.Sprintf("%s=%d", rateChildEnv, n)}, env...)...)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	p := &rateProc{cmd: cmd, in: in}
	t.Cleanup(func() {
		p.in.Close()
		_ = p.cmd.Wait()
	})
	return p
}

func (p *rateProc) setTime(t *testing.T, now time.Time) {
	t.Helper()
	if _, err := fmt.Fprintln(p.in, now.Format(time.RFC3339Nano)); err != nil {
		t.Fatalf("set the clock of a worker process: %v", err)
	}
}

// ranJob is the job of a worker process's line "ran <id>".
func ranJob(t *testing.T, line string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(strings.TrimPrefix(line, "ran "), 10, 64)
	if err != nil {
		t.Fatalf("worker process said %q", line)
	}
	return id
}

// openRateBackend opens the store of backend ("sqlite": a new file;
// "postgres", "postgres-reserved": a new schema) for the test, and returns
// it with the environment that gives its worker processes (startRateProcs)
// the same store; "postgres-reserved" has them reserve rate budget
// (IDEM_RATE_OWN).
func openRateBackend(t *testing.T, backend string) (store.Store, []string) {
	t.Helper()
	if backend == "sqlite" {
		path := filepath.Join(t.TempDir(), "idem.db")
		s, err := sqlitestore.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, []string{"IDEM_RATE_DB=" + path}
	}
	url, schema := dbtest.NewSchema(t)
	env := []string{"IDEM_MP_URL=" + url, "IDEM_MP_SCHEMA=" + schema}
	if backend == "postgres-reserved" {
		env = append(env, "IDEM_RATE_OWN=1")
	}
	return parentPG(t, url, schema), env
}

// TestRateLimitThreeProcesses: three worker processes (the test binary run
// again) share one store (a SQLite file; a PostgreSQL schema), a rate of 5
// per minute on tenant acme and a default rate of 5 per minute for every
// other tenant (beta and gamma, each its own budget), each process with
// its own client and 10 workers. The test moves every process's clock a
// window on each time it has seen 15 runs. Each window starts at most 5
// jobs of each tenant (by StartedAt, the claim's time), and every job runs
// exactly once. "postgres-reserved" gives each tenant its own rate and no
// default, so that the processes spend budget they reserve in advance.
func TestRateLimitThreeProcesses(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres", "postgres-reserved"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			const perTenant, procs = 20, 3
			total := perTenant * len(rateTenants)
			st, env := openRateBackend(t, backend)
			c, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2031, 1, 1, 0, 0, 1, 0, time.UTC)
			lines := make(chan string, 4*total)
			ps := startRateProcs(t, env, procs, lines, now)
			deadline := time.After(waitTimeout)
			var ids []int64
			for _, tenant := range rateTenants {
				ids = append(ids, enqueueTenant(t, c, tenant, perTenant)...)
			}
			seen := map[int64]int{}
			for len(seen) < total {
				select {
				case l := <-lines:
					seen[ranJob(t, l)]++
					if len(seen)%(rateLimit.Rate*len(rateTenants)) == 0 {
						now = now.Add(time.Minute)
						for _, p := range ps {
							p.setTime(t, now)
						}
					}
				case <-deadline:
					t.Fatalf("%d of %d jobs ran", len(seen), total)
				}
			}
			rows := waitAll(t, c, ids, waitTimeout)
			type tenantWindow struct {
				tenant string
				start  time.Time
			}
			perWindow := map[tenantWindow]int{}
			for _, r := range rows {
				perWindow[tenantWindow{r.Tenant, r.StartedAt.Truncate(time.Minute)}]++
			}
			for w, n := range perWindow {
				if n > rateLimit.Rate {
					t.Errorf("tenant %s: window %v started %d jobs, rate %d", w.tenant, w.start, n, rateLimit.Rate)
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("job %d ran %d times", id, n)
				}
			}
		})
	}
}
