//go:build unix

package sqlitestore

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const symlinkChildEnv = "IDEM_TEST_SYMLINK_CHILD"

// TestLeaderTakeoverSparesAStoreOpenedThroughAnotherPath: a process opens
// the database through a symbolic link and leads; a Store of this process
// then opens the same database by its resolved name. SQLite follows the link
// (one database, one WAL), so the idem lock files must be the same too:
// the second Store must see that the file is open elsewhere and leave the
// live leader's row alone.
func TestLeaderTakeoverSparesAStoreOpenedThroughAnotherPath(t *testing.T) {
	if path := os.Getenv(symlinkChildEnv); path != "" {
		s, err := Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if !leads(t, s, "child", t0) {
			os.Stdout.WriteString("child does not lead\n")
			return
		}
		os.Stdout.WriteString("child leads\n")
		var b [1]byte
		os.Stdin.Read(b[:]) // until killed (or the parent ends)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	resolved := filepath.Join(dir, "data", "idem.db")
	if err := os.Mkdir(filepath.Dir(resolved), 0o700); err != nil {
		t.Fatal(err)
	}
	openAt(t, resolved).Close() // create and migrate
	link := filepath.Join(dir, "current.db")
	if err := os.Symlink(resolved, link); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaderTakeoverSparesAStoreOpenedThroughAnotherPath$", "-test.count=1")
	cmd.Env = append(os.Environ(), symlinkChildEnv+"="+link)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
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
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line <- sc.Text()
			return
		}
		line <- "child output ended"
	}()
	select {
	case l := <-line:
		if l != "child leads" {
			t.Fatal(l)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer from the child process")
	}

	s := openAt(t, resolved)
	if leads(t, s, "parent", t0.Add(time.Minute)) {
		t.Fatal("a Store opened by the resolved name took over from a live leader that opened the file through a symbolic link")
	}
}

// TestSyncedWALOfAFileOpenedThroughASymlink: SQLite keeps the WAL next to
// the file a symbolic link points to, so that is the file the store must
// fsync before it acknowledges a write (Synchronous FULL); a WAL path
// derived from the link names no file, and the fsync was skipped.
func TestSyncedWALOfAFileOpenedThroughASymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	resolved := filepath.Join(dir, "data", "idem.db")
	if err := os.Mkdir(filepath.Dir(resolved), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "current.db")
	if err := os.Symlink(resolved, link); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, link)
	var synced []string
	var mu sync.Mutex
	realSync := s.w.sync
	s.w.sync = func(path string) error {
		mu.Lock()
		synced = append(synced, path)
		mu.Unlock()
		return realSync(path)
	}
	insert(t, s, t0, keyedJob("", "K", "fp"))
	if _, err := os.Stat(resolved + "-wal"); err != nil {
		t.Fatalf("SQLite's WAL is not next to the linked file: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(synced) == 0 {
		t.Fatal("no WAL fsync for the insert")
	}
	for _, p := range synced {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("the store fsyncs %s, which is not SQLite's WAL (%s-wal): %v", p, resolved, err)
		}
	}
}
