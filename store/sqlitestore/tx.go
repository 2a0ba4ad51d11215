package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"

	"github.com/idem-dev/idem/store"
)

// Tx is a caller's write transaction on the store's database, open while
// the function given to WriteTx runs. The application's own tables live in
// the same database file; writes made through Tx commit together with the
// jobs inserted (idem.EnqueueTx) and the completions written
// (idem.JobCompleteTx) through it, or not at all.
//
// A Tx is only valid inside that function: after it returns, every method
// reports ErrTxDone.
type Tx struct {
	t    *wtx
	w    *writer
	done bool
	// acked are the queues of the FIFO holds the finishes through this Tx
	// ended (JobFinishManyTx): announced once WriteTx committed.
	acked []string
}

// ErrTxDone is returned by a Tx used after its WriteTx function returned.
var ErrTxDone = errors.New("sqlitestore: transaction has already ended")

// errWriteInTx is returned to a store write submitted with the context of a
// WriteTx function: it would wait for the writer that runs that very
// function, for ever.
var errWriteInTx = errors.New("sqlitestore: a store write inside WriteTx must go through its Tx (idem.EnqueueTx, idem.JobCompleteTx)")

// inWriteTx is the context key that marks the context given to a WriteTx
// function; its value is the writer running it.
type inWriteTx struct{}

// WriteTx runs fn in a write transaction on the store's database and commits
// it when fn returns nil; when fn returns an error, everything written
// through tx is rolled back and that error is returned.
//
// fn runs on the store's single writer, inside one of its group commits
// (under its own savepoint) and exactly once; WriteTx returns after the
// commit is durable, like every store write. While fn runs no other write
// of this store proceeds (SQLite has one writer at a time in any case), so
// keep fn to database work: no network calls, no waiting on other
// goroutines that write to the store. Store writes inside fn must go
// through tx; one made with the context fn receives returns an error
// instead of waiting for ever. Close every *sql.Rows before fn returns.
// Heartbeats and the rescuer are writes too: a fn that runs longer than
// the client's lease (idem.Config.LeaseDuration) can cost running jobs
// their leases. fn must not end the transaction itself (COMMIT, ROLLBACK,
// END, or RELEASE / ROLLBACK TO of a savepoint it did not create; its own
// savepoints are fine): that ends the group commit it runs in, and WriteTx
// and the writes grouped with it then report an error although what ran
// before may have committed. Return an error to roll fn's writes back.
//
// A panic in fn rolls its writes back and is raised again in the goroutine
// that called WriteTx (fn itself runs for the writer, on a goroutine the
// writer waits for, where it would end the process); a call of
// runtime.Goexit in fn (t.FailNow) rolls them back too and ends the
// goroutine that called WriteTx, which does not return.
func (s *Store) WriteTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	var fnErr error
	var panicked *callerPanic
	var exited bool
	var acked []string
	err := s.w.submit(ctx, 1, writeReq{once: true, fn: func(t *wtx) error {
		tx := &Tx{t: t, w: s.w}
		defer func() { tx.done = true }()
		// fn may write any table through tx, flow_controls too, and
		// roll it back: claims read the flow-control rows afresh.
		defer t.flow.invalidate()
		if _, err := t.exec("SAVEPOINT caller_tx"); err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		panicked, exited, fnErr = runCaller(ctx, s.w, tx, fn)
		if fnErr == nil && panicked == nil && !exited {
			acked = tx.acked
		} else {
			if _, err := t.exec("ROLLBACK TO caller_tx"); err != nil {
				return fmt.Errorf("rollback to savepoint: %w", err)
			}
			// The ids of jobs fn inserted were handed to it (and to the
			// Observer): like a deleted job's, they are never given again.
			if t.nextID > 0 {
				if _, err := t.exec(qJobSeqRaise, t.nextID); err != nil {
					return fmt.Errorf("raise job sequence: %w", err)
				}
			}
		}
		if _, err := t.exec("RELEASE caller_tx"); err != nil {
			return fmt.Errorf("release savepoint: %w", err)
		}
		return nil
	}})
	if panicked != nil {
		panic(panicked.value)
	}
	if exited {
		// fn ended its goroutine: end the caller's, as fn would have
		// without WriteTx, its writes rolled back.
		runtime.Goexit()
	}
	if err != nil {
		return fmt.Errorf("write tx: %w", err)
	}
	s.announce(acked)
	return fnErr
}

// callerPanic is the value a WriteTx function panicked with (nil for a
// panic(nil) under GODEBUG=panicnil=1).
type callerPanic struct{ value any }

// runCaller runs a WriteTx function, turning a panic into its value and a
// call of runtime.Goexit (t.FailNow and the like) into exited. fn runs on
// a goroutine of its own, which the writer waits for (so nothing else uses
// the connection meanwhile): Goexit cannot be recovered, and called on the
// writer's goroutine it ended the writer, every later write of the store
// waiting for ever.
func runCaller(ctx context.Context, w *writer, tx *Tx, fn func(ctx context.Context, tx *Tx) error) (panicked *callerPanic, exited bool, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ended := false // fn returned or panicked
		defer func() { exited = !ended }()
		func() {
			returned := false
			defer func() {
				// recover is nil for a Goexit and, under panicnil=1, for a
				// panic(nil), which it stops: only then is ended set.
				if r := recover(); r != nil || !returned {
					panicked = &callerPanic{value: r}
				}
			}()
			err = fn(context.WithValue(ctx, inWriteTx{}, w), tx)
			returned = true
		}()
		ended = true
	}()
	<-done
	if exited {
		panicked = nil
	}
	return panicked, exited, err
}

func (tx *Tx) check() error {
	if tx == nil || tx.done {
		return ErrTxDone
	}
	return nil
}

// ExecContext runs a statement that returns no rows inside the transaction.
func (tx *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	return tx.t.conn.ExecContext(ctx, query, args...)
}

// QueryContext runs a query inside the transaction; it sees the
// transaction's own writes. Close the rows before the WriteTx function
// returns.
func (tx *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	return tx.t.conn.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query expected to return at most one row inside
// the transaction.
func (tx *Tx) QueryRowContext(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	return tx.t.conn.QueryRowContext(ctx, query, args...), nil
}

// JobInsertManyTx is JobInsertMany inside the caller's transaction tx: the
// jobs exist exactly when tx commits (idem.EnqueueTx). The batch is all or
// nothing within tx: when it fails part-way, what it wrote is rolled back
// (a savepoint of its own), so a caller that ignores the error and commits
// keeps its own writes and none of the batch's.
func (s *Store) JobInsertManyTx(ctx context.Context, tx *Tx, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	if tx.w != s.w {
		return nil, errors.New("insert jobs: the transaction belongs to another store")
	}
	if p == nil || len(p.Jobs) == 0 {
		return nil, nil
	}
	if err := store.CheckInsertTenants(p.Jobs); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if _, err := tx.t.exec("SAVEPOINT insert_tx"); err != nil {
		return nil, fmt.Errorf("insert jobs: savepoint: %w", err)
	}
	res, err := insertJobs(tx.t, p.Jobs, truncUS(store.OrNow(p.Now)))
	if err != nil {
		if _, rerr := tx.t.exec("ROLLBACK TO insert_tx"); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))
		}
	}
	if _, rerr := tx.t.exec("RELEASE insert_tx"); rerr != nil && err == nil {
		err = fmt.Errorf("release savepoint: %w", rerr)
	}
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return res, nil
}

// JobFinishManyTx is JobFinishMany inside the caller's transaction tx, so a
// handler's own writes and its job's completion commit together
// (idem.JobCompleteTx). The finishes are all or nothing within tx: when
// they fail part-way, what they wrote is rolled back (a savepoint of their
// own), so a caller that ignores the error and commits keeps its own writes
// and none of the finishes' (the jobs still run under their leases).
func (s *Store) JobFinishManyTx(ctx context.Context, tx *Tx, ps []*store.JobFinishParams) ([]error, error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	if tx.w != s.w {
		return nil, errors.New("finish jobs: the transaction belongs to another store")
	}
	if len(ps) == 0 {
		return nil, nil
	}
	if _, err := tx.t.exec("SAVEPOINT finish_tx"); err != nil {
		return nil, fmt.Errorf("finish jobs: savepoint: %w", err)
	}
	errs := make([]error, len(ps))
	var acked []string
	tx.t.released = nil
	err := finishMany(tx.t, ps, finishIDs(ps), errs)
	if err == nil {
		acked, err = ackCancels(tx.t, ps, errs)
	}
	acked = append(acked, tx.t.takeReleased()...)
	if err != nil {
		if _, rerr := tx.t.exec("ROLLBACK TO finish_tx"); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))
		}
	}
	if _, rerr := tx.t.exec("RELEASE finish_tx"); rerr != nil && err == nil {
		err = fmt.Errorf("release savepoint: %w", rerr)
	}
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	tx.acked = append(tx.acked, acked...)
	return errs, nil
}
