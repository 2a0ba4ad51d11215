package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuUse is the CPU time a measurement used: this process (the system's
// client: idem's runtime or River's, and the load) and the PostgreSQL
// backends of the system's pool.
type cpuUse struct {
	client, backends time.Duration
}

// cpuMeter reads the CPU time of this process and of the backends serving
// one application_name. CPU time per job holds still on a machine other
// work is loading, where jobs/s moves with the load.
type cpuMeter struct {
	h       *harness
	app     string
	client  time.Duration
	backend map[int]time.Duration // by backend pid, at start
}

// startCPU starts measuring the CPU of this process and of the backends of
// application app.
func (h *harness) startCPU(ctx context.Context, app string) *cpuMeter {
	m := &cpuMeter{h: h, app: app, client: processCPU()}
	m.backend = m.backends(ctx)
	return m
}

// stop returns the CPU used since startCPU. A backend that started
// meanwhile counts whole; one that ended meanwhile is lost (pools keep
// their connections while a measurement runs).
func (m *cpuMeter) stop(ctx context.Context) cpuUse {
	u := cpuUse{client: processCPU() - m.client}
	for pid, t := range m.backends(ctx) {
		u.backends += t - m.backend[pid]
	}
	return u
}

// backends returns the CPU time of each backend of m.app.
func (m *cpuMeter) backends(ctx context.Context) map[int]time.Duration {
	out := map[int]time.Duration{}
	rows, err := m.h.admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", m.app)
	if err != nil {
		m.h.logf("cpu: backends of %s: %v", m.app, err)
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			if t, ok := procCPU(pid); ok {
				out[pid] = t
			}
		}
	}
	return out
}

// procCPU returns utime + stime of process pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command (which may hold spaces) start at state,
	// field 3; utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// processCPU returns the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perJob returns u per job in µs: client, backends.
func (u cpuUse) perJob(n int) (client, backends float64) {
	if n <= 0 {
		return 0, 0
	}
	return float64(u.client.Microseconds()) / float64(n), float64(u.backends.Microseconds()) / float64(n)
}

// cpuRows are the CPU rows of a measurement of n jobs: this process's CPU
// and the pool's backends' CPU per job, in µs (lower is better).
func cpuRows(label string, idem, river cpuUse, n int) []row {
	ic, ib := idem.perJob(n)
	rc, rb := river.perJob(n)
	return []row{
		{name: label + ": client CPU per job", idem: ic, river: rc, unit: "µs"},
		{name: label + ": PostgreSQL backends' CPU per job", idem: ib, river: rb, unit: "µs"},
	}
}
