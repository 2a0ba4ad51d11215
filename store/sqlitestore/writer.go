package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/batch"
	"github.com/idem-dev/idem/store"
)

// gatherYields is how many times the writer yields to gather more queued
// operations before it starts a group commit.
const gatherYields = 2

// writeReq is one write operation: fn runs inside the writer's
// transaction. once marks a caller's transaction (Store.WriteTx), whose
// function must run exactly once: a group holding one runs with a savepoint
// per op from the start, instead of being run again after another op's
// failure (see runBatch).
type writeReq struct {
	fn   func(w *wtx) error
	once bool
	// plain marks an insert of jobs without key or dependencies only: its
	// rows may wait in wtx.deferred and go in with those of the ops next to
	// it in one multi-row INSERT (see wtx.deferred).
	plain bool
}

// writeOp is one write operation inside a group commit.
type writeOp = batch.Call[writeReq, struct{}]

// writer owns the single write connection and runs group commits. The
// gathering (take everything queued, up to MaxBatchOps operations and
// MaxBatchItems items) is a batch.Runner; the writer runs each group.
type writer struct {
	conn     *sql.Conn
	runner   *batch.Runner[writeReq, struct{}]
	closed   atomic.Bool
	log      *slog.Logger
	tx       *wtx
	stopOnce sync.Once
	batches  atomic.Int64 // group commits run (diagnostics)
	opsRun   atomic.Int64 // operations run (diagnostics)

	// walPath, when set, is the WAL file the syncers fsync after each
	// group commit before the ops are answered (synchronous FULL; the
	// connection itself runs at NORMAL). Empty: answer at once.
	walPath  string
	syncq    chan syncJob
	syncDone chan struct{}
	// sync makes the file at walPath durable (syncFile; tests replace it).
	sync func(path string) error
	// failed holds the first WAL fsync error (see syncAndAnswer).
	failed atomic.Pointer[error]
	// durability numbers the group commits and knows which are durable.
	durability *durability
	// gate makes the writers of every Store on the file take turns (nil:
	// none); gateWait is how long a group waits for it.
	gate     *writeGate
	gateWait time.Duration
}

// syncers is how many WAL fsyncs may be in flight at once. A group
// committed while an fsync runs starts its own at once (while fewer than
// syncers run) instead of waiting for the running one to end and then
// for its own: the kernel overlaps concurrent flushes of one file, so a
// caller waits about one fsync instead of up to two.
const syncers = 3

// syncJob is a committed group waiting for its WAL fsync.
type syncJob struct {
	ops  []*writeOp
	errs []error
	seq  uint64 // the group's number (durability); its COMMIT may have failed
}

func newWriter(conn *sql.Conn, maxOps, maxItems int, log *slog.Logger, walPath string) *writer {
	w := &writer{
		walPath:    walPath,
		syncq:      make(chan syncJob, 64),
		syncDone:   make(chan struct{}),
		conn:       conn,
		log:        log,
		sync:       syncFile,
		tx:         &wtx{conn: conn, stmts: make(map[string]*sql.Stmt)},
		durability: newDurability(),
	}
	w.runner = batch.New(&batch.Config[writeReq]{
		MaxCount:  maxOps,
		MaxWeight: maxItems,
		Yields:    gatherYields,
	}, w.runBatch)
	return w
}

// submit hands fn to the writer and waits for the group commit that ran it.
// Once taken into a group, the op is always answered (after commit or
// rollback, and the WAL fsync); the caller waits for that answer so it never
// misses a committed write.
func (w *writer) submit(ctx context.Context, weight int, req writeReq) error {
	if w.closed.Load() {
		return store.ErrClosed
	}
	if err := w.failure(); err != nil {
		return err
	}
	if ctx.Value(inWriteTx{}) == w {
		return errWriteInTx
	}
	_, err := w.runner.Submit(ctx, req, weight)
	if errors.Is(err, batch.ErrStopped) {
		return store.ErrClosed
	}
	return err
}

func (w *writer) isClosed() bool { return w.closed.Load() }

// start runs the writer (and the syncer) goroutines.
func (w *writer) start() {
	go w.syncLoop()
	w.runner.Start()
}

// stop makes the writer finish its current group and exit; operations not
// yet taken get store.ErrClosed. Committed groups are synced and answered first.
func (w *writer) stop() {
	w.stopOnce.Do(func() {
		w.closed.Store(true)
		w.runner.Stop()
		close(w.syncq)
	})
	<-w.syncDone
}

// syncLoop hands committed groups to up to syncers goroutines, each of
// which fsyncs the WAL and then answers the groups it took. A group is
// taken only by an fsync that starts after the group committed, so no op
// is answered before its writes are durable. Groups that commit while
// every syncer is busy are gathered and share the next free one.
// Meanwhile the writer already executes the next group: the fsync is off
// its critical path.
//
// Answers go out in commit order: a syncer whose fsync returned waits
// until the groups handed out before its own are answered. The WAL is a
// chain — recovery stops at the first frame that did not reach the disk —
// so a group is durable only if every earlier group is; were a later
// fsync's success reported before an earlier one failed, acknowledged
// groups could be lost.
func (w *writer) syncLoop() {
	defer close(w.syncDone)
	work := make(chan syncBatch) // unbuffered: a send finds an idle syncer
	var wg sync.WaitGroup
	for range syncers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				w.syncAndAnswer(b)
			}
		}()
	}
	in := w.syncq
	var jobs []syncJob
	prev := make(chan struct{})
	close(prev) // nothing before the first batch
	for in != nil || len(jobs) > 0 {
		var out chan syncBatch // nil (never ready) while nothing waits
		next := syncBatch{jobs: jobs, prev: prev}
		if len(jobs) > 0 {
			out = work
			next.done = make(chan struct{})
		}
		select {
		case j, ok := <-in:
			if !ok {
				in = nil // stopped: hand over what is left, then end
				continue
			}
			jobs = append(jobs, j)
		case out <- next:
			jobs, prev = nil, next.done
		}
	}
	close(work)
	wg.Wait()
}

// syncBatch is the groups one fsync covers; prev is closed once the
// batch handed out before it has been answered, done once this one has.
type syncBatch struct {
	jobs       []syncJob
	prev, done chan struct{}
}

// syncAndAnswer fsyncs the WAL and, after the batch before it, answers the
// ops of b: with their own outcome, or with the error of this fsync or of
// any earlier one. The first failed fsync fails the writer for good
// (failure): after it, no write can be known durable — the kernel may
// have dropped the pages it could not write, and later frames of the WAL
// depend on them — so every op answered afterwards gets that error and
// submit refuses new ones until the store is opened again.
func (w *writer) syncAndAnswer(b syncBatch) {
	defer close(b.done)
	err := w.sync(w.walPath)
	<-b.prev
	if err != nil {
		err = fmt.Errorf("sync wal: %w", err)
		w.log.Error("sqlitestore: sync wal; the store refuses writes until it is opened again", slog.Any("err", err))
		first := err
		w.failed.CompareAndSwap(nil, &first)
	}
	if f := w.failure(); f != nil {
		err = f
		w.durability.wake()
	} else if n := len(b.jobs); n > 0 {
		w.durability.markDurable(b.jobs[n-1].seq)
	}
	for _, j := range b.jobs {
		for i, op := range j.ops {
			if err != nil && j.errs[i] == nil {
				op.Answer(struct{}{}, err)
			} else {
				op.Answer(struct{}{}, j.errs[i])
			}
		}
	}
}

// failure returns the error of the first failed WAL fsync, or nil; it
// wraps idemtype.ErrUnavailable (HTTP 503, /readyz not ready).
func (w *writer) failure() error {
	if p := w.failed.Load(); p != nil {
		return fmt.Errorf("%w: sqlitestore refuses writes after a failed WAL fsync (open the store again): %w", idemtype.ErrUnavailable, *p)
	}
	return nil
}

// syncFile fsyncs the file at path. It opens the file each time, so a WAL
// file that SQLite recreated is never missed.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no WAL: nothing was written since the last checkpoint reset
	}
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	return errors.Join(serr, cerr)
}

func (w *writer) close() error {
	for _, st := range w.tx.stmts {
		st.Close()
	}
	return w.conn.Close()
}

// runBatch runs ops in one transaction and answers them after the commit.
//
// Fast path: the ops run back to back without savepoints. An op's logical
// error (one wrapping an idemtype sentinel, such as ErrNotFound) is always
// returned before the op wrote anything, so it needs no rollback. Any other
// error (an SQL failure, possibly after partial writes) rolls the whole
// transaction back and the batch runs again with one SAVEPOINT per op, so
// that the failing op rolls back only itself. A group holding a caller's
// transaction (writeReq.once) takes the savepoint path at once, so that
// function never runs twice.
func (w *writer) runBatch(batch []*writeOp) {
	w.batches.Add(1)
	w.opsRun.Add(int64(len(batch)))
	once := slices.ContainsFunc(batch, func(op *writeOp) bool { return op.Req.once })
	gated := w.gate.enter(w.gateWait)
	errs, retry, fatal, seq := w.runOnce(batch, once)
	if fatal == nil && retry {
		errs, _, fatal, seq = w.runOnce(batch, true)
	}
	if gated {
		w.gate.leave() // committed or rolled back: the next writer may begin
	}
	switch {
	case fatal == nil && w.walPath != "":
		w.syncq <- syncJob{ops: batch, errs: errs, seq: seq}
		return
	case seq != 0 && w.walPath != "":
		// The COMMIT failed (nothing to read); its number is passed when
		// the groups before it are durable.
		w.syncq <- syncJob{seq: seq}
	case seq != 0:
		w.durability.markDurable(seq) // synchronous NORMAL: no fsync to wait for
	}
	for i, op := range batch {
		if fatal != nil {
			op.Answer(struct{}{}, fatal)
		} else {
			op.Answer(struct{}{}, errs[i])
		}
	}
}

// runOnce runs the batch in one transaction. With savepoints false it
// reports retry (and rolls back) when an op failed in a way that may have
// left partial writes. fatal is an error that fails every op. seq is the
// group's number (durability) once its COMMIT was issued, else 0.
func (w *writer) runOnce(batch []*writeOp, savepoints bool) (errs []error, retry bool, fatal error, seq uint64) {
	t := w.tx
	t.nextID = 0
	t.deferred, t.deferOn, t.deferredOps = t.deferred[:0], false, 0
	if _, err := t.exec("BEGIN IMMEDIATE"); err != nil {
		return nil, false, fmt.Errorf("begin: %w", err), 0
	}
	errs = make([]error, len(batch))
	for i, op := range batch {
		if err := op.Context().Err(); err != nil {
			errs[i] = err
			continue
		}
		if !savepoints {
			if !op.Req.plain {
				// Every other op sees the rows deferred before it.
				if err := t.flushDeferred(); err != nil {
					w.rollback()
					return nil, true, nil, 0
				}
			}
			t.deferOn = op.Req.plain
			err := op.Req.fn(t)
			t.deferOn = false
			if err != nil && !isLogical(err) {
				w.rollback()
				return nil, true, nil, 0
			}
			errs[i] = err
			continue
		}
		if _, err := t.exec("SAVEPOINT op"); err != nil {
			w.rollback()
			return nil, false, fmt.Errorf("savepoint: %w", err), 0
		}
		if err := op.Req.fn(t); err != nil {
			errs[i] = err
			t.flow.invalidate() // the op's writes to flow_controls are undone
			if _, rerr := t.exec("ROLLBACK TO op"); rerr != nil {
				w.rollback()
				return nil, false, fmt.Errorf("rollback to savepoint: %w", rerr), 0
			}
		}
		if _, err := t.exec("RELEASE op"); err != nil {
			w.rollback()
			return nil, false, fmt.Errorf("release savepoint: %w", err), 0
		}
	}
	if err := t.flushDeferred(); err != nil {
		// Which op's rows failed is not known here: again, one savepoint
		// (and one INSERT) per op.
		w.rollback()
		return nil, true, nil, 0
	}
	seq = w.durability.begin()
	if _, err := t.exec("COMMIT"); err != nil {
		w.rollback()
		return nil, false, fmt.Errorf("commit: %w", err), seq
	}
	return errs, false, nil, seq
}

// isLogical reports whether err is an op's decision (nothing written)
// rather than a database failure.
func isLogical(err error) bool {
	for _, s := range []error{idemtype.ErrNotFound, idemtype.ErrLeaseLost, idemtype.ErrWrongState,
		idemtype.ErrInvalid, idemtype.ErrKeyReused, idemtype.ErrKeyInProgress} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func (w *writer) rollback() {
	w.tx.flow.invalidate() // what the cache took from this transaction is undone
	if _, err := w.tx.exec("ROLLBACK"); err != nil {
		w.log.Error("sqlitestore: rollback", slog.Any("err", err))
	}
}

// wtx is the writer's view of the current transaction: prepared statements
// cached on the one write connection, and job id allocation.
type wtx struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	// nextID is the last job id allocated in this transaction; 0 = not yet
	// read from the database (see qJobSeq).
	nextID int64
	// flow caches the flow-control rows between claims (see flowCache).
	flow flowCache
	// deferred holds the rows of plain inserts (writeReq.plain) not yet
	// written; deferOn is set while such an op runs: the group's
	// consecutive single-job enqueues go in as one multi-row INSERT
	// (flushDeferred) before the next other op runs and before COMMIT,
	// rather than one INSERT each — the statement, not the row, is most of
	// a one-job insert's cost. Never when the group runs with a savepoint
	// per op (a failing op must roll back only its own rows).
	deferred []*idemtype.JobRow
	deferOn  bool
	// deferredOps counts the ops whose rows wait in deferred; merged and
	// mergeFailed count the flushes that wrote the rows of several ops in
	// one go, and those that failed (diagnostics and tests).
	deferredOps         int
	merged, mergeFailed atomic.Int64
	// released collects the queues where the op running made pending
	// dependants available (releaseDependants), for the op to announce
	// once committed (takeReleased): a finish's caller cannot see them.
	released []string
}

// takeReleased returns the queues collected in t.released and empties it.
func (t *wtx) takeReleased() []string {
	q := t.released
	t.released = nil
	return q
}

// flushDeferred writes the deferred rows.
func (t *wtx) flushDeferred() error {
	if t.deferredOps > 1 {
		t.merged.Add(1)
	}
	t.deferredOps = 0
	for len(t.deferred) > 0 {
		n := min(len(t.deferred), plainBatch)
		if err := insertPlainRows(t, t.deferred[:n]); err != nil {
			t.mergeFailed.Add(1)
			return err
		}
		t.deferred = t.deferred[n:]
	}
	return nil
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
