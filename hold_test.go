package idem_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// Crash tests must kill a worker process while some handler is in flight, or
// "only jobs running at the kill run again" holds vacuously. A child process
// therefore obeys "hold N" on stdin: from its N-th handler start after the
// command on, every handler it starts prints "held <job> <attempt>" and
// blocks until the process dies, so the parent kills it right after the
// first such line and knows that job was running, with its handler started,
// at the kill. Counting starts in the child (not waiting for progress in the
// parent) makes the kill point independent of how fast the parent watches.

// holder decides which handler starts hold.
type holder struct {
	armed atomic.Bool
	left  atomic.Int64 // starts before the first held one
}

// hold reports whether this handler start holds.
func (h *holder) hold() bool {
	return h.armed.Load() && h.left.Add(-1) < 0
}

// childCommands reads the child's stdin: "hold N" arms the holder, "go" is
// sent on goCh (TestSharedKeysAcrossProcesses' start barrier). A child whose
// stdin is never written never holds.
func childCommands() (h *holder, goCh <-chan struct{}) {
	h = new(holder)
	ch := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			var n int64
			if _, err := fmt.Sscanf(sc.Text(), "hold %d", &n); err == nil && n >= 1 {
				h.left.Store(n - 1)
				h.armed.Store(true)
			} else if sc.Text() == "go" {
				ch <- struct{}{}
			}
		}
	}()
	return h, ch
}

// holdUntilKilled is a held handler: it reports the job on stdout and
// blocks until its context ends (the process is SIGKILLed long before the
// lease could lapse: the heartbeat keeps it).
func holdUntilKilled(ctx context.Context, j *idem.JobRow) error {
	fmt.Printf("held %d %d\n", j.ID, j.Attempt)
	<-ctx.Done()
	return ctx.Err()
}

// holdThenKill sends "hold after" to a child, waits until it reports a held
// handler, kills it and returns the held (job → attempt) it reported
// before dying (at least one; lines still in the pipe at the kill may be
// lost, so this is a subset of what it held).
func holdThenKill(t *testing.T, after int, stdin io.Writer, stdout io.Reader, kill func()) map[int64]int64 {
	t.Helper()
	first := make(chan struct{})
	done := make(chan map[int64]int64, 1)
	go func() {
		held := map[int64]int64{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var id, attempt int64
			if _, err := fmt.Sscanf(sc.Text(), "held %d %d", &id, &attempt); err == nil {
				if len(held) == 0 {
					close(first)
				}
				held[id] = attempt
			}
		}
		done <- held
	}()
	if _, err := fmt.Fprintf(stdin, "hold %d\n", after); err != nil {
		t.Fatalf("hold: %v", err)
	}
	select {
	case <-first:
	case <-time.After(120 * time.Second):
		t.Fatalf("the child held no handler within 120 s (its %d-th start after the command)", after)
	}
	kill()
	held := <-done // the kill closes the pipe
	if len(held) == 0 {
		t.Fatal("no held job recorded")
	}
	return held
}
