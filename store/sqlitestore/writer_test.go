package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startTestWriter runs a writer on its own database file, with sync in
// place of the WAL fsync (walPath is only handed to it).
func startTestWriter(t *testing.T, sync func(path string) error) *writer {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(conn, DefaultMaxBatchOps, DefaultMaxBatchItems, slog.New(slog.DiscardHandler), "test-wal")
	w.sync = sync
	w.start()
	t.Cleanup(func() {
		w.stop()
		w.close()
		db.Close()
	})
	return w
}

// submitAsync submits a no-op write and returns the channel its outcome
// arrives on.
func submitAsync(w *writer) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- w.submit(context.Background(), 1, writeReq{fn: func(*wtx) error { return nil }})
	}()
	return done
}

// waitSignal waits for ch or fails the test after a generous deadline (a
// liveness bound, not a timing assertion).
func waitSignal[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// TestWriterAnswersAfterSync: a committed op is answered only once the
// fsync that covers it has returned.
func TestWriterAnswersAfterSync(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 8), make(chan struct{})
	var releaseOnce sync.Once
	w := startTestWriter(t, func(string) error {
		started <- struct{}{}
		<-release
		return nil
	})
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	done := submitAsync(w)
	waitSignal(t, started, "fsync")
	select {
	case err := <-done:
		t.Fatalf("op answered (%v) while its fsync had not returned", err)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	if err := waitSignal(t, done, "answer"); err != nil {
		t.Fatal(err)
	}
}

// TestWriterSyncsOverlap: a group committed while an fsync is in flight
// starts its own fsync at once and is answered while the first one still
// runs (with one fsync at a time it would wait for the first).
func TestWriterSyncsOverlap(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	started, release := make(chan struct{}, 1), make(chan struct{})
	var releaseOnce sync.Once
	w := startTestWriter(t, func(string) error {
		if calls.Add(1) == 1 {
			started <- struct{}{}
			<-release // the first fsync hangs until released
		}
		return nil
	})
	// Registered after the writer's cleanup, so it runs first: a failed
	// test still lets the writer stop.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	first := submitAsync(w)
	waitSignal(t, started, "first fsync")
	if err := waitSignal(t, submitAsync(w), "answer of the second op while the first fsync runs"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		t.Fatalf("first op answered (%v) before its fsync returned", err)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	if err := waitSignal(t, first, "answer of the first op"); err != nil {
		t.Fatal(err)
	}
}

// TestWriterSyncError: a failed fsync fails the ops it covered, which
// committed but are not known to be durable.
func TestWriterSyncError(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk gone")
	w := startTestWriter(t, func(string) error { return boom })
	if err := waitSignal(t, submitAsync(w), "answer"); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}
