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

	"github.com/idem-dev/idem/idemtype"
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

// hangingFirstSync is a WAL fsync whose first call signals started and
// blocks until release is closed, then returns firstErr; every later call
// signals later and succeeds.
func hangingFirstSync(firstErr error) (fn func(string) error, started, later chan struct{}, release chan struct{}) {
	var calls atomic.Int64
	started, later, release = make(chan struct{}, 1), make(chan struct{}, 8), make(chan struct{})
	return func(string) error {
		if calls.Add(1) == 1 {
			started <- struct{}{}
			<-release
			return firstErr
		}
		later <- struct{}{}
		return nil
	}, started, later, release
}

// TestWriterSyncsOverlap: a group committed while an fsync is in flight
// starts its own fsync at once (with one fsync at a time it would wait for
// the first to end), but is answered only after the group before it: the
// WAL is a chain, a group is durable only if every earlier one is.
func TestWriterSyncsOverlap(t *testing.T) {
	t.Parallel()
	syncFn, started, later, release := hangingFirstSync(nil)
	var releaseOnce sync.Once
	w := startTestWriter(t, syncFn)
	// Registered after the writer's cleanup, so it runs first: a failed
	// test still lets the writer stop.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	first := submitAsync(w)
	waitSignal(t, started, "first fsync")
	second := submitAsync(w)
	waitSignal(t, later, "second fsync while the first runs")
	select {
	case err := <-second:
		t.Fatalf("second op answered (%v) before the group before it", err)
	case err := <-first:
		t.Fatalf("first op answered (%v) before its fsync returned", err)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	if err := waitSignal(t, first, "answer of the first op"); err != nil {
		t.Fatal(err)
	}
	if err := waitSignal(t, second, "answer of the second op"); err != nil {
		t.Fatal(err)
	}
}

// TestWriterEarlierSyncFailureFailsLater: when an fsync fails, a later
// group whose own fsync succeeded is not acknowledged either (its WAL
// frames follow frames that may be lost), and the writer refuses every
// write after it until the store is opened again.
func TestWriterEarlierSyncFailureFailsLater(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk gone")
	syncFn, started, later, release := hangingFirstSync(boom)
	var releaseOnce sync.Once
	w := startTestWriter(t, syncFn)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	first := submitAsync(w)
	waitSignal(t, started, "first fsync")
	second := submitAsync(w)
	waitSignal(t, later, "second fsync while the first runs")
	releaseOnce.Do(func() { close(release) })
	if err := waitSignal(t, first, "answer of the first op"); !errors.Is(err, boom) {
		t.Fatalf("first op: %v, want %v", err, boom)
	}
	if err := waitSignal(t, second, "answer of the second op"); !errors.Is(err, boom) {
		t.Fatalf("second op (its own fsync succeeded): %v, want %v", err, boom)
	}
	ran := false
	err := w.submit(context.Background(), 1, writeReq{fn: func(*wtx) error { ran = true; return nil }})
	if !errors.Is(err, boom) || !errors.Is(err, idemtype.ErrUnavailable) || ran {
		t.Fatalf("write after the failure: %v (ran %v), want refused as unavailable with %v", err, ran, boom)
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
