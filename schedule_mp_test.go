package idem_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// schedChildEnv makes the test binary a scheduler process (see TestMain):
// it reads one time per line on stdin, sets its clock to it, runs one
// scheduler pass and answers "ok" (or the error) on stdout.
const schedChildEnv = "IDEM_SCHED_CHILD"

func schedChild() int {
	ctx := context.Background()
	st, closeStore, ok := childStore(ctx, "IDEM_SCHED_SQLITE")
	if !ok {
		return 2
	}
	defer closeStore()
	clock := &fakeClock{}
	c, err := idem.NewClient(st, &idem.Config{Now: clock.Now, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		now, err := time.Parse(time.RFC3339Nano, in.Text())
		if err != nil {
			fmt.Println("err", err)
			continue
		}
		clock.mu.Lock()
		clock.now = now
		clock.mu.Unlock()
		if _, err := idem.RunSchedulerOnce(c); err != nil {
			fmt.Println("err", err)
			continue
		}
		fmt.Println("ok")
	}
	return 0
}

// schedProc is one scheduler process driven over its stdin.
type schedProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startSchedProc starts scheduler process n; env names its database
// (IDEM_MP_URL and IDEM_MP_SCHEMA, or IDEM_SCHED_SQLITE).
func startSchedProc(t *testing.T, n int, env ...string) *schedProc {
	t.Helper()
	cmd, in, out := dbtest.StartChild(t, append([]string{fmt.Sprintf("%s=%d", schedChildEnv, n)}, env...)...)
	p := &schedProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() { p.stop() })
	return p
}

// step runs one pass at now and returns the process's answer.
func (p *schedProc) step(now time.Time) string {
	if _, err := fmt.Fprintln(p.in, now.Format(time.RFC3339Nano)); err != nil {
		return err.Error()
	}
	if !p.out.Scan() {
		return "exited"
	}
	return p.out.Text()
}

func (p *schedProc) stop() {
	if p.in != nil {
		p.in.Close()
		_ = p.cmd.Wait()
		p.in = nil
	}
}

// TestScheduleThreeProcessesPostgres runs three scheduler processes on one
// PostgreSQL schema through the simulated day of
// TestScheduleTenSchedulersOneJobPerFiring (each pass of all three at the
// same instant): the clock steps back 45 minutes at noon, every process is
// replaced at 06:00 and the clock jumps 2 h at 18:00. Every firing has
// exactly one job.
func TestScheduleThreeProcessesPostgres(t *testing.T) {
	t.Parallel()
	url, schema := dbtest.NewSchema(t)
	scheduleThreeProcesses(t, parentPG(t, url, schema), "IDEM_MP_URL="+url, "IDEM_MP_SCHEMA="+schema)
}

// TestScheduleThreeProcessesSQLite is TestScheduleThreeProcessesPostgres
// with three processes sharing one SQLite file.
func TestScheduleThreeProcessesSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sched.db")
	st, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	scheduleThreeProcesses(t, st, "IDEM_SCHED_SQLITE="+path)
}

// scheduleThreeProcesses runs the day of TestScheduleThreeProcessesPostgres
// on st, with scheduler processes started with env.
func scheduleThreeProcesses(t *testing.T, st store.Store, env ...string) {
	clock := &fakeClock{now: schedDay}
	admin := schedClient(t, st, clock)
	for _, s := range daySchedules() {
		putSchedule(t, admin, s)
	}
	start := func() []*schedProc {
		ps := make([]*schedProc, 3)
		for i := range ps {
			ps[i] = startSchedProc(t, i, env...)
		}
		return ps
	}
	procs := start()
	steppedBack, restarted, jumped := false, false, false
	for clock.Now().Before(schedDay.Add(24 * time.Hour)) {
		clock.Add(5 * time.Minute)
		now := clock.Now()
		switch {
		case !restarted && !now.Before(schedDay.Add(6*time.Hour)):
			restarted = true
			for _, p := range procs {
				p.stop()
			}
			procs = start()
		case !steppedBack && !now.Before(schedDay.Add(12*time.Hour)):
			steppedBack = true
			clock.Add(-45 * time.Minute)
		case !jumped && !now.Before(schedDay.Add(18*time.Hour)):
			jumped = true
			clock.Add(2 * time.Hour)
		}
		now = clock.Now()
		var wg sync.WaitGroup
		answers := make([]string, len(procs))
		for i, p := range procs {
			wg.Add(1)
			go func() { defer wg.Done(); answers[i] = p.step(now) }()
		}
		wg.Wait()
		for i, a := range answers {
			if a != "ok" {
				t.Fatalf("process %d at %v: %s", i, now, a)
			}
		}
	}
	want := expectedDayKeys(t, schedDay.Add(18*time.Hour-5*time.Minute), schedDay.Add(20*time.Hour))
	compareKeys(t, firingKeys(t, admin), want)
}
