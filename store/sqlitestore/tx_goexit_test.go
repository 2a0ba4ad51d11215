package sqlitestore

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestWriteTxGoexitRollsBackAndEndsTheCaller: a WriteTx function that calls
// runtime.Goexit (t.FailNow in a test, or a library calling it) ends the
// goroutine that called WriteTx, as it would have without WriteTx, with
// its writes rolled back, and the store's writer goes on. fn runs on the
// writer's goroutine, which Goexit ended before: the caller and every
// later write of the store waited for ever.
func TestWriteTxGoexitRollsBackAndEndsTheCaller(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	createTable(t, s, "CREATE TABLE marks (n int)")
	// A bound for a hang, not a timing: each step below takes milliseconds.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ended := make(chan struct{})
	returned := false
	go func() {
		defer close(ended)
		_ = s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO marks VALUES (1)"); err != nil {
				return err
			}
			runtime.Goexit()
			return nil
		})
		returned = true
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the goroutine that called WriteTx did not end after its function called runtime.Goexit")
	}
	if returned {
		t.Error("WriteTx returned after its function called runtime.Goexit, want the caller's goroutine ended")
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("after")}, Now: t0}); err != nil {
		t.Fatalf("a write after the Goexit: %v (the writer stopped)", err)
	}
	if n := countRows(t, s, "marks"); n != 0 {
		t.Errorf("%d rows after a Goexit, want the write rolled back", n)
	}
}

// TestWriteTxPanicNilRollsBack: under GODEBUG=panicnil=1 (recover returns
// nil for a panic(nil), and stops it) a WriteTx function's panic(nil) is
// still a panic: its writes are rolled back and the caller's goroutine
// panics. It was taken for a return: the writes committed and WriteTx
// returned nil.
func TestWriteTxPanicNilRollsBack(t *testing.T) {
	s := openTest(t, nil)
	createTable(t, s, "CREATE TABLE marks (n int)")
	t.Setenv("GODEBUG", "panicnil=1")
	returned := func() (returned bool) {
		defer func() { _ = recover() }()
		_ = s.WriteTx(context.Background(), func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO marks VALUES (1)"); err != nil {
				return err
			}
			panic(nil)
		})
		return true
	}()
	if returned {
		t.Error("WriteTx returned after its function's panic(nil), want the panic raised again")
	}
	if n := countRows(t, s, "marks"); n != 0 {
		t.Errorf("%d rows after a panic(nil), want the write rolled back", n)
	}
}
