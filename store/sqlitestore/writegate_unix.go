//go:build unix

package sqlitestore

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// writeGate makes the writers of the Stores on one database file (in this
// process or others) take turns: a writer holds an exclusive flock on
// path+"-idem-write.lock" from before BEGIN IMMEDIATE until its COMMIT or
// ROLLBACK. SQLite alone is not fair to writers of other processes: a
// connection that finds the write lock taken sleeps in its busy handler
// (up to 100 ms a time), while a busy writer takes the lock again right
// after each commit, so under load the others waited past their busy
// timeout ("database is locked": failed enqueues, lost heartbeats and
// leases). A process blocked in flock is woken when the lock is released.
//
// The gate only adds fairness: a writer that cannot get it within its
// wait goes on without it (SQLite's own lock still serialises the
// writes), and a process that ends, however it ends, loses it.
type writeGate struct {
	f  *os.File
	mu sync.Mutex
	// last is the latest blocking attempt, while its goroutine waits in
	// flock; a new enter adopts it instead of starting another.
	last *gateAttempt
	// closing: Close came while an attempt was blocked; that attempt's
	// goroutine closes f when its flock returns.
	closing bool
}

// gateAttempt is one blocking flock, run by its own goroutine.
type gateAttempt struct {
	got       chan struct{} // closed when the flock returned for a waiting writer
	err       error
	finished  bool // the flock returned
	abandoned bool // the writer stopped waiting: release at once
}

// openWriteGate opens the gate of the database at path; nil (no gate)
// when the lock file cannot be opened.
func openWriteGate(path string) *writeGate {
	f, err := os.OpenFile(path+"-idem-write.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	return &writeGate{f: f}
}

// enter takes the gate, waiting at most wait, and reports whether it got
// it (then leave must follow).
func (g *writeGate) enter(wait time.Duration) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	a := g.last
	if a == nil {
		if flock(g.f, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			g.mu.Unlock()
			return true
		}
		a = &gateAttempt{got: make(chan struct{})}
		g.last = a
		fd := int(g.f.Fd())
		go g.block(a, fd)
	}
	a.abandoned = false
	g.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-a.got:
	case <-t.C:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !a.finished {
		a.abandoned = true // still blocked: it releases the lock when it gets it
		return false
	}
	g.last = nil
	return a.err == nil
}

// block runs one blocking flock for a.
func (g *writeGate) block(a *gateAttempt, fd int) {
	var err error
	for {
		if err = syscall.Flock(fd, syscall.LOCK_EX); err != syscall.EINTR {
			break
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	a.finished, a.err = true, err
	if !a.abandoned {
		close(a.got)
		return
	}
	g.last = nil
	if err == nil {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
	}
	if g.closing {
		g.f.Close()
	}
}

// leave releases the gate taken by enter.
func (g *writeGate) leave() {
	_ = flock(g.f, syscall.LOCK_UN)
}

// close closes the lock file, or leaves that to a blocked attempt.
func (g *writeGate) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last != nil && !g.last.finished {
		g.closing = true
		return
	}
	g.f.Close()
}
