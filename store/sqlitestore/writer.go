package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// writeOp is one write operation waiting for the writer.
type writeOp struct {
	ctx    context.Context
	weight int
	fn     func(w *wtx) error
	done   chan error
}

// writer owns the single write connection and runs group commits.
type writer struct {
	conn     *sql.Conn
	ops      chan *writeOp // unbuffered: a blocked sender is a queued op
	quit     chan struct{}
	stopped  chan struct{}
	closed   atomic.Bool
	maxOps   int
	maxItems int
	log      *slog.Logger
	tx       *wtx
	stopOnce sync.Once
}

func newWriter(conn *sql.Conn, maxOps, maxItems int, log *slog.Logger) *writer {
	return &writer{
		conn:     conn,
		ops:      make(chan *writeOp),
		quit:     make(chan struct{}),
		stopped:  make(chan struct{}),
		maxOps:   maxOps,
		maxItems: maxItems,
		log:      log,
		tx:       &wtx{conn: conn, stmts: make(map[string]*sql.Stmt)},
	}
}

var opPool = sync.Pool{New: func() any { return &writeOp{done: make(chan error, 1)} }}

// submit hands fn to the writer and waits for the group commit that ran it.
func (w *writer) submit(ctx context.Context, weight int, fn func(*wtx) error) error {
	if w.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	op := opPool.Get().(*writeOp)
	op.ctx, op.weight, op.fn = ctx, weight, fn
	select {
	case w.ops <- op:
	case <-w.quit:
		op.ctx, op.fn = nil, nil
		opPool.Put(op)
		return ErrClosed
	case <-ctx.Done():
		op.ctx, op.fn = nil, nil
		opPool.Put(op)
		return ctx.Err()
	}
	// Once taken, the op is always answered (after commit or rollback); we
	// wait for the answer so the caller never misses a committed write.
	err := <-op.done
	op.ctx, op.fn = nil, nil
	opPool.Put(op)
	return err
}

func (w *writer) isClosed() bool { return w.closed.Load() }

// stop makes the writer finish its current batch and exit; operations not
// yet taken get ErrClosed.
func (w *writer) stop() {
	w.stopOnce.Do(func() {
		w.closed.Store(true)
		close(w.quit)
	})
	<-w.stopped
}

func (w *writer) close() error {
	for _, st := range w.tx.stmts {
		st.Close()
	}
	return w.conn.Close()
}

func (w *writer) run() {
	defer close(w.stopped)
	batch := make([]*writeOp, 0, w.maxOps)
	for {
		var first *writeOp
		select {
		case first = <-w.ops:
		case <-w.quit:
			return
		}
		batch = append(batch[:0], first)
		items := first.weight
	drain:
		for len(batch) < w.maxOps && items < w.maxItems {
			select {
			case op := <-w.ops:
				batch = append(batch, op)
				items += op.weight
			default:
				break drain
			}
		}
		w.runBatch(batch)
		clear(batch)
	}
}

// runBatch runs ops in one transaction, each in its own savepoint, and
// answers them after the commit.
func (w *writer) runBatch(batch []*writeOp) {
	t := w.tx
	t.nextID = 0
	answer := func(errs []error, all error) {
		for i, op := range batch {
			if all != nil {
				op.done <- all
			} else {
				op.done <- errs[i]
			}
		}
	}
	if _, err := t.exec("BEGIN IMMEDIATE"); err != nil {
		answer(nil, fmt.Errorf("begin: %w", err))
		return
	}
	errs := make([]error, len(batch))
	single := len(batch) == 1
	for i, op := range batch {
		if err := op.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if single {
			errs[i] = op.fn(t)
			break
		}
		if _, err := t.exec("SAVEPOINT op"); err != nil {
			w.abort(batch, answer, fmt.Errorf("savepoint: %w", err))
			return
		}
		if err := op.fn(t); err != nil {
			errs[i] = err
			if _, rerr := t.exec("ROLLBACK TO op"); rerr != nil {
				w.abort(batch, answer, fmt.Errorf("rollback to savepoint: %w", rerr))
				return
			}
		}
		if _, err := t.exec("RELEASE op"); err != nil {
			w.abort(batch, answer, fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if single && errs[0] != nil {
		if _, err := t.exec("ROLLBACK"); err != nil {
			w.log.Error("sqlitestore: rollback", slog.Any("err", err))
		}
		answer(errs, nil)
		return
	}
	if _, err := t.exec("COMMIT"); err != nil {
		w.abort(batch, answer, fmt.Errorf("commit: %w", err))
		return
	}
	answer(errs, nil)
}

func (w *writer) abort(batch []*writeOp, answer func([]error, error), err error) {
	if _, rerr := w.tx.exec("ROLLBACK"); rerr != nil {
		w.log.Error("sqlitestore: rollback", slog.Any("err", rerr))
	}
	answer(nil, err)
}

// wtx is the writer's view of the current transaction: prepared statements
// cached on the one write connection, and job id allocation.
type wtx struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	// nextID is the last job id allocated in this transaction; 0 = not yet
	// read from sqlite_sequence.
	nextID int64
}

// maxCachedStmts bounds the statement cache (dynamic IN lists vary).
const maxCachedStmts = 512

func (t *wtx) stmt(q string) (*sql.Stmt, error) {
	if st, ok := t.stmts[q]; ok {
		return st, nil
	}
	st, err := t.conn.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	if len(t.stmts) >= maxCachedStmts {
		for k, old := range t.stmts {
			old.Close()
			delete(t.stmts, k)
			break
		}
	}
	t.stmts[q] = st
	return st, nil
}

func (t *wtx) exec(q string, args ...any) (sql.Result, error) {
	st, err := t.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.Background(), args...)
}

func (t *wtx) query(q string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(context.Background(), args...)
}

// queryRow runs a one-row query; errors (including sql.ErrNoRows) come from Scan.
func (t *wtx) queryRow(q string, args ...any) *sql.Row {
	st, err := t.stmt(q)
	if err != nil {
		// Route the prepare error through a Row: QueryRow on a closed
		// statement is not possible, so run it unprepared.
		return t.conn.QueryRowContext(context.Background(), q, args...)
	}
	return st.QueryRowContext(context.Background(), args...)
}

// peekID returns the id the next inserted job will get.
func (t *wtx) peekID() (int64, error) {
	if t.nextID == 0 {
		var seq int64
		err := t.queryRow(qJobSeq).Scan(&seq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("read job sequence: %w", err)
		}
		t.nextID = seq
	}
	return t.nextID + 1, nil
}

// takeID allocates the id returned by peekID.
func (t *wtx) takeID() (int64, error) {
	id, err := t.peekID()
	if err != nil {
		return 0, err
	}
	t.nextID = id
	return id, nil
}
