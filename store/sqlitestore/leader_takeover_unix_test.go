//go:build unix

package sqlitestore

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLeaderTakeoverOpenWaitsForATakeover: while another Store holds the
// open-files lock exclusively (clearing the leader rows), Open waits for
// it — a Store must not lead before that DELETE ran — and gives up when
// its context ends.
func TestLeaderTakeoverOpenWaitsForATakeover(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	s := openAt(t, path)
	if !leads(t, s, "old", t0) {
		t.Fatal("no first leader")
	}
	s.Close()

	// Another Store's takeover in progress.
	other, err := os.OpenFile(path+"-idem-open.lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if s, err := Open(ctx, path, nil); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open during another Store's takeover: %v, want the context's end", err)
	}

	type opened struct {
		s   *Store
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := Open(t.Context(), path, nil)
		done <- opened{s, err}
	}()
	select {
	case o := <-done:
		if o.s != nil {
			o.s.Close()
		}
		t.Fatalf("Open returned (%v) during another Store's takeover", o.err)
	case <-time.After(100 * time.Millisecond):
	}
	// The other Store is done and stays open: the new one must not take
	// over (the old row stands for the other Store's, still open).
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.s.Close()
	if leads(t, o.s, "new", t0.Add(time.Minute)) {
		t.Fatal("a Store took over while another had the file open")
	}
}

const takeoverChildEnv = "IDEM_TEST_TAKEOVER_CHILD"

// TestLeaderTakeoverAcrossProcesses: a Store in another process that
// opened the file without the process lock and leads keeps its term when
// the holder of that lock closes and a Store of the first process opens
// the file again; once that other process is killed (no resign, no Close),
// a Store opened afterwards takes over at once.
func TestLeaderTakeoverAcrossProcesses(t *testing.T) {
	if path := os.Getenv(takeoverChildEnv); path != "" {
		takeoverChild(t, path)
		return
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	first := openAt(t, path) // holds the process lock

	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaderTakeoverAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), takeoverChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // the child stays until killed
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			cmd.Process.Kill() // SIGKILL: a crash
			cmd.Wait()
		}
	}
	defer kill()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "child ") {
				line <- l
				return
			}
		}
		line <- "child output ended: " + sc.Err().Error()
	}()
	select {
	case l := <-line:
		if l != "child leads" {
			t.Fatal(l)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer from the child process")
	}

	first.Close() // the child still has the file open
	second := openAt(t, path)
	if second.lock == nil {
		t.Fatal("the reopened Store did not get the process lock")
	}
	if leads(t, second, "second", t0.Add(time.Minute)) {
		t.Fatal("a Store took over from a live leader in another process")
	}
	second.Close()

	kill()
	third := openAt(t, path)
	if !leads(t, third, "third", t0.Add(2*time.Minute)) {
		t.Fatal("after the other process was killed, a new Store waits out its term")
	}
}

// takeoverChild is the other process of TestLeaderTakeoverAcrossProcesses:
// it opens the file, leads, says so, and waits to be killed.
func takeoverChild(t *testing.T, path string) {
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.lock != nil {
		os.Stdout.WriteString("child got the process lock\n")
		return
	}
	if !leads(t, s, "child", t0) {
		os.Stdout.WriteString("child does not lead\n")
		return
	}
	os.Stdout.WriteString("child leads\n")
	var b [1]byte
	os.Stdin.Read(b[:]) // until killed (or the parent ends)
}
