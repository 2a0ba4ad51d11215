// Package executor runs one attempt of a claimed job and turns its outcome
// into a finish: the store.JobFinishParams the completer writes.
//
// A keyed job first takes the execution lease of its idempotency key: a
// completed record finishes the job from the cache, a live lease held by
// another job snoozes it (no attempt used), as does a store error on the key
// (the handler never ran), otherwise the handler runs.
// SetOutcome is the one mapping from (result, error) to the job's next state;
// Go workers (Execute), pull workers (idem.Client.Complete and Fail) and
// idem.JobCompleteTx all use it, so a rule about outcomes lives here once.
package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/deliver"
	"github.com/idem-dev/idem/store"
)

// MinKeyWait and MaxKeyWait bound how long a job whose idempotency key is
// held by another live execution snoozes before it looks again.
const (
	MinKeyWait = 50 * time.Millisecond
	MaxKeyWait = 5 * time.Second
	// KeyErrorWait is how long a keyed job snoozes (no attempt used) when
	// the store failed to answer for its key.
	KeyErrorWait = MaxKeyWait
)

// Handler runs one job and returns its result as JSON (nil = null).
type Handler func(ctx context.Context, row *idemtype.JobRow) (json.RawMessage, error)

// Config configures an Executor. Store, Now, ResultTTL, RetryDelay and
// Handler are required.
type Config struct {
	// Store holds the idempotency records.
	Store store.Store
	// Logger receives warnings and, at debug, each keyed job's cache
	// hit, miss, stored result and failure not cached; default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock; its times are used as given (pass UTC).
	Now func() time.Time
	// LeaseDuration is the key lease of a job claimed without a lease expiry.
	LeaseDuration time.Duration
	// CompressThreshold: results above this many bytes are stored
	// gzip-compressed in the record; negative = never.
	CompressThreshold int
	// ResultTTL is how long the result of a kind is cached.
	ResultTTL func(kind string) time.Duration
	// RetryDelay is the backoff after the failed attempt row.Attempt.
	RetryDelay func(row *idemtype.JobRow) time.Duration
	// Handler returns the handler of a kind, or nil.
	Handler func(kind string) Handler
	// Target returns the delivery target of a job whose kind has no
	// handler, with its name for the attempt log; a nil target means none
	// matches. Nil: jobs without a handler fail.
	Target func(ctx context.Context, row *idemtype.JobRow) (deliver.Target, string, error)
	// Timeout returns how long one attempt of row may run (0 = no limit);
	// nil = no limit. At the timeout the handler's context is cancelled
	// with cause idemtype.ErrJobTimeout, and an error it returns fails the
	// attempt as a timeout.
	Timeout func(row *idemtype.JobRow) time.Duration
	// CacheHits and CacheMisses count jobs answered from the cache and
	// executions that ran; nil = not counted.
	CacheHits, CacheMisses *atomic.Int64
	// OnCacheHit and OnCacheMiss are told of each keyed job answered from
	// the cache and of each keyed job that runs because nothing was cached;
	// nil = not told. They run on the executor's goroutines and must not
	// block. A hit is told (and counted) when the key step answers the job,
	// before its finish is written; a miss by Execute when the handler is
	// about to run, and never by Settle (its caller calls CountMiss once
	// the job is handed out). A caller that counts only what was written
	// leaves the hit hooks unset and counts the written finishes whose
	// WasCached is set.
	OnCacheHit, OnCacheMiss func(row *idemtype.JobRow)
}

// Executor runs attempts. It is safe for concurrent use and holds no state
// between calls.
type Executor struct {
	cfg Config
}

// New returns an executor on cfg, or an error naming a missing field.
func New(cfg *Config) (*Executor, error) {
	if cfg == nil || cfg.Store == nil || cfg.Now == nil || cfg.ResultTTL == nil || cfg.RetryDelay == nil || cfg.Handler == nil {
		return nil, errors.New("new executor: Store, Now, ResultTTL, RetryDelay and Handler are required")
	}
	if cfg.LeaseDuration <= 0 {
		return nil, errors.New("new executor: LeaseDuration must be positive")
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CacheHits == nil {
		c.CacheHits = new(atomic.Int64)
	}
	if c.CacheMisses == nil {
		c.CacheMisses = new(atomic.Int64)
	}
	return &Executor{cfg: c}, nil
}

// Store returns the store the executor uses (JobCompleteTx joins its
// transactions).
func (e *Executor) Store() store.Store { return e.cfg.Store }

// Now returns the executor's clock reading.
func (e *Executor) Now() time.Time { return e.cfg.Now() }

// Execute runs one claimed job to its finish: from the result cache when its
// key holds a completed result, else through its handler. key is the outcome
// of a batched AcquireKeys for this job, or nil to acquire alone. The
// returned finish has FinishedAt and DurationMS set. A handler whose
// context ended before it would start (the job was cancelled, its lease
// lost, the client stopping) does not start: the attempt fails with the
// context's cause.
func (e *Executor) Execute(ctx context.Context, row *idemtype.JobRow, key *store.RecordAcquireResult) *store.JobFinishParams {
	fin, _ := e.Attempt(ctx, row, key)
	return fin
}

// Attempt is Execute that also reports whether fin is the completion the
// handler wrote in a transaction of its own (idem.JobCompleteTx; see
// settleTx). Such a finish is written even when the job's lease was lost
// meanwhile: that transaction's commit ended the lease (the heartbeat then
// finds the job no longer running), and the store accepts the finish as
// a repeat of this lease's completion, or refuses it (ErrLeaseLost) when
// the transaction rolled back and the lease was lost indeed.
func (e *Executor) Attempt(ctx context.Context, row *idemtype.JobRow, key *store.RecordAcquireResult) (fin *store.JobFinishParams, inTx bool) {
	start := e.cfg.Now()
	fin, run := e.Settle(ctx, row, key)
	switch {
	case run && ctx.Err() != nil:
		// Not a miss: nothing runs (a job given back runs, and counts its
		// miss, at a later claim).
		e.SetOutcome(fin, row, nil, fmt.Errorf("not started: %w", context.Cause(ctx)))
	case run:
		if row.IdempotencyKey != "" {
			e.CountMiss(row)
		}
		inTx = e.run(ctx, row, fin)
	}
	if run {
		e.releaseCancelledKey(ctx, row)
	}
	now := e.cfg.Now()
	fin.FinishedAt, fin.DurationMS = now, now.Sub(start).Milliseconds()
	return fin, inTx
}

// Settle does the key step of an attempt: it reports whether the handler
// must run. When not, fin holds the finish: cached, snoozed behind another
// holder of the key, or failed because the key could not be acquired. A
// keyed job that must run is a cache miss that Settle does not count: the
// caller calls CountMiss once the job is handed to its worker (a pull
// claim that fails afterwards gives the job back, and the next claim's
// miss is the one that counts).
func (e *Executor) Settle(ctx context.Context, row *idemtype.JobRow, key *store.RecordAcquireResult) (fin *store.JobFinishParams, run bool) {
	fin = &store.JobFinishParams{ID: row.ID, LeaseToken: row.LeaseToken}
	if row.IdempotencyKey == "" {
		return fin, true
	}
	run, err := e.acquireKey(ctx, row, key, fin)
	if err != nil {
		e.cfg.Logger.Warn("acquire idempotency key failed", "job", row.ID, "err", err)
		fin = &store.JobFinishParams{ID: row.ID, LeaseToken: row.LeaseToken}
		var se *keyStoreError
		if errors.As(err, &se) && !errors.Is(err, idemtype.ErrInvalid) {
			// The store failed, not the job (its handler never ran): snooze
			// without using an attempt, as a held key does, and look again.
			// A refused request (ErrInvalid) or an undecodable cached
			// result would fail the same way every time: those fail the
			// attempt.
			fin.State, fin.Outcome, fin.Snooze = idemtype.StateScheduled, idemtype.OutcomeSnoozed, true
			fin.RunAt = e.cfg.Now().Add(KeyErrorWait)
			fin.Error = store.StorableError(err.Error())
			return fin, false
		}
		e.SetOutcome(fin, row, nil, err)
		return fin, false
	}
	return fin, run
}

// CountMiss counts a cache miss of keyed job row, whose handler runs
// (CacheMisses, OnCacheMiss).
func (e *Executor) CountMiss(row *idemtype.JobRow) {
	e.cfg.CacheMisses.Add(1)
	e.debugKey("result cache miss", row)
	if e.cfg.OnCacheMiss != nil {
		e.cfg.OnCacheMiss(row)
	}
}

// releaseCancelledKey gives back the key lease of a job whose attempt was
// cancelled (its context's cause idemtype.ErrJobCancelled), before or
// while its handler ran: its cancel settled the key's record, but a lease
// taken after that commit (the claim's acquire racing the cancel) is stored
// under the job's owner and nobody would release it — the finish is
// refused — so the key's next job would wait until it ended. A lease taken
// before the cancel was released by it: this changes nothing then. Only
// for a cancel: the job is final, whereas a run that lost its lease may be
// running elsewhere under the same owner. A key held by the job row
// (KeyHeld) stores no lease: nothing to give back. The give-back names this
// run's claim (JobLease): a retry of the job claimed again since takes the
// key under the same owner name, and keeps it. A lost lease (ErrLeaseLost)
// counts as a cancel when the job reads cancelled: a cancel committed by
// another process is seen so on SQLite (no announcement), by the
// heartbeater's refused renewal. The give-back is bounded by a third of
// the lease; one that fails or answers late is read back (keyGivenBack)
// before it is warned of.
func (e *Executor) releaseCancelledKey(ctx context.Context, row *idemtype.JobRow) {
	if row.IdempotencyKey == "" || row.KeyHeld {
		return
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, idemtype.ErrJobCancelled) && !errors.Is(cause, idemtype.ErrLeaseLost) {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.LeaseDuration/3)
	defer cancel()
	if !errors.Is(cause, idemtype.ErrJobCancelled) {
		cur, err := e.cfg.Store.JobGet(rctx, &store.JobGetParams{ID: row.ID})
		if err != nil || cur.State != idemtype.StateCancelled {
			return // rescued, given back or gone: not a cancel
		}
	}
	err := e.cfg.Store.RecordRelease(rctx, &store.RecordReleaseParams{
		Tenant: row.Tenant, Key: row.IdempotencyKey, Owner: store.JobOwner(row.ID),
		JobLease: &store.Lease{ID: row.ID, Token: row.LeaseToken}})
	if err == nil || e.keyGivenBack(ctx, row) {
		return
	}
	e.cfg.Logger.Warn("giving back the key of a cancelled job failed; the key waits for its lease to end",
		"job", row.ID, "err", err)
}

// keyGivenBack reads back, within a third of the lease (without ctx's
// cancellation), the record of a cancelled job's key whose give-back
// failed: the release may have committed all the same (a store that
// answers late, a connection lost after the commit), as Client.Do reads
// a Do key back. It reports whether the key is no longer held by the
// job's owner (or its record is gone): then it was given back.
func (e *Executor) keyGivenBack(ctx context.Context, row *idemtype.JobRow) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.LeaseDuration/3)
	defer cancel()
	rec, err := e.cfg.Store.RecordGet(rctx, &store.RecordGetParams{Tenant: row.Tenant, Key: row.IdempotencyKey, Now: e.cfg.Now()})
	if errors.Is(err, idemtype.ErrNotFound) {
		return true
	}
	given := err == nil && rec.LeaseOwner != store.JobOwner(row.ID)
	if given {
		e.cfg.Logger.Debug("key of a cancelled job given back although the store's answer failed; read back", "job", row.ID)
	}
	return given
}

// keyStoreError is a store call of the key step that failed: the job snoozes
// rather than use an attempt (Settle).
type keyStoreError struct{ err error }

func (e *keyStoreError) Error() string { return e.err.Error() }
func (e *keyStoreError) Unwrap() error { return e.err }

// keyParams is the execution-lease request for a keyed job.
func (e *Executor) keyParams(row *idemtype.JobRow, now time.Time) *store.RecordAcquireParams {
	lease := now.Add(e.cfg.LeaseDuration)
	if row.LeaseExpiresAt != nil {
		lease = *row.LeaseExpiresAt
	}
	return &store.RecordAcquireParams{
		Tenant: row.Tenant, Key: row.IdempotencyKey, Owner: store.JobOwner(row.ID), JobID: row.ID,
		LeaseUntil: lease, DedupUntil: now, ExpiresAt: now.Add(e.cfg.ResultTTL(row.Kind)), Now: now}
}

// AcquireKeys takes the execution leases of the keyed jobs of a claim in one
// store call; a failure leaves each job to try alone (nil entries). A job
// the claim returned with KeyHeld holds its key by its job lease already:
// it is answered acquired without asking the store.
func (e *Executor) AcquireKeys(ctx context.Context, jobs []*idemtype.JobRow) map[int64]*store.RecordAcquireResult {
	now := e.cfg.Now()
	var out map[int64]*store.RecordAcquireResult // nil when no job has a key
	var rows []*idemtype.JobRow
	var ps []*store.RecordAcquireParams
	for _, j := range jobs {
		switch {
		case j.IdempotencyKey == "":
		case j.KeyHeld:
			if out == nil {
				out = map[int64]*store.RecordAcquireResult{}
			}
			out[j.ID] = &store.RecordAcquireResult{Acquired: true}
		default:
			rows = append(rows, j)
			ps = append(ps, e.keyParams(j, now))
		}
	}
	if len(ps) == 0 {
		return out
	}
	res, err := e.cfg.Store.RecordAcquireMany(ctx, ps)
	if err != nil {
		e.cfg.Logger.Warn("acquire idempotency keys failed; trying one by one", "jobs", len(ps), "err", err)
		return out
	}
	if out == nil {
		out = make(map[int64]*store.RecordAcquireResult, len(rows))
	}
	for i, r := range rows {
		out[r.ID] = res[i]
	}
	return out
}

// acquireKey takes the execution lease of the job's key, unless res already
// holds the outcome of a batched acquire. It reports whether the handler
// should run; when not, fin is filled (cached or snoozed).
func (e *Executor) acquireKey(ctx context.Context, row *idemtype.JobRow, res *store.RecordAcquireResult, fin *store.JobFinishParams) (bool, error) {
	now := e.cfg.Now()
	if res == nil {
		var err error
		if res, err = e.cfg.Store.RecordAcquire(ctx, e.keyParams(row, now)); err != nil {
			return false, &keyStoreError{err: fmt.Errorf("acquire key: %w", err)}
		}
	}
	if res.Acquired {
		return true, nil
	}
	rec := res.Record
	if rec.Status == idemtype.RecordCompleted {
		out, err := DecodeResult(rec.Result, rec.Compressed)
		if err != nil {
			return false, err
		}
		e.cfg.CacheHits.Add(1)
		e.debugKey("result cache hit", row, slog.Int64("original_job", rec.ResultJobID))
		if e.cfg.OnCacheHit != nil {
			e.cfg.OnCacheHit(row)
		}
		fin.State, fin.Outcome = idemtype.StateCompleted, idemtype.OutcomeCached
		// ResultJSON: a record's bytes are not checked as a job's result is
		// (store.FinishCheck), so they are made storable the same way.
		fin.Result, fin.WasCached, fin.OriginalJobID = ResultJSON(out), true, rec.ResultJobID
		return false, nil
	}
	wait := MaxKeyWait
	if rec.LeaseUntil != nil {
		wait = min(max(rec.LeaseUntil.Sub(now), MinKeyWait), MaxKeyWait)
	}
	fin.State, fin.Outcome, fin.Snooze = idemtype.StateScheduled, idemtype.OutcomeSnoozed, true
	fin.RunAt = now.Add(wait)
	fin.Error = fmt.Sprintf("idempotency key held by %s", rec.LeaseOwner)
	return false, nil
}

// NullIfEmpty returns nil for an empty result (stored as SQL NULL).
func NullIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// callHandler runs the job's handler, turning a panic into a *PanicError
// and a call of runtime.Goexit (t.FailNow and the like) into a
// *GoexitError, both with the stack. The handler runs on a goroutine of
// its own, which callHandler waits for: Goexit cannot be recovered, and
// called on the executor's goroutine it would end that goroutine too,
// leaving the job registered as running (its lease renewed until Stop,
// its worker slot taken) with no finish ever written.
func (e *Executor) callHandler(ctx context.Context, row *idemtype.JobRow) (res []byte, err error) {
	h := e.cfg.Handler(row.Kind)
	if h == nil {
		return nil, fmt.Errorf("no worker registered for kind %q", row.Kind)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var stack string // at the end of a handler that did not return
		ended := false   // the handler returned or panicked
		defer func() {
			if !ended {
				// Neither returned nor panicked: the goroutine is ending
				// through runtime.Goexit, whose call is on the stack.
				err = &GoexitError{Stack: stack}
			}
		}()
		func() {
			returned := false
			defer func() {
				r := recover()
				if r == nil && returned {
					return
				}
				// A panic, or Goexit: recover is nil for both a Goexit and,
				// under GODEBUG=panicnil=1, a panic(nil), which it stops;
				// only after a panic does the code after this call run.
				stack = string(debug.Stack())
				err = &PanicError{Value: r, Stack: stack}
			}()
			res, err = h(ctx, row)
			returned = true
		}()
		ended = true
	}()
	<-done
	return res, err
}

// run makes the attempt: the kind's handler, else a delivery to the job's
// target. It reports whether fin is the completion the handler wrote in a
// transaction of its own (settleTx).
func (e *Executor) run(ctx context.Context, row *idemtype.JobRow, fin *store.JobFinishParams) (inTx bool) {
	if e.cfg.Handler(row.Kind) == nil && e.cfg.Target != nil {
		e.deliver(ctx, row, fin)
		return false
	}
	r := &running{exec: e, row: row}
	ctx = context.WithValue(ctx, runningKey{}, r)
	res, err := e.callWithTimeout(ctx, row)
	e.SetOutcome(fin, row, res, err)
	if tf := r.tx.Load(); tf != nil {
		return e.settleTx(ctx, row, fin, tf, err)
	}
	return false
}

// TxReadTimeout bounds the read with which an attempt whose handler
// completed its job in a transaction (JobCompleteTx) and then returned
// something else learns whether that transaction committed.
const TxReadTimeout = 10 * time.Second

// settleTx decides the finish of an attempt whose handler wrote tf, its
// job's completion, in a transaction of its own (NoteTxCompletion) and then
// returned the outcome fin holds (handlerErr being its error). When that
// outcome is the same completion there is nothing to decide. Otherwise
// the transaction's completion stands if it committed (the job reads
// completed, at this attempt): fin becomes tf, which the store accepts as a
// repeat of this lease's completion (and refuses were it not this
// lease's), so the job is reported once, completed with the result that
// committed, whatever the handler did afterwards. A transaction that rolled
// back leaves the job running: fin stays the handler's outcome. It reports
// whether fin is then tf's completion.
func (e *Executor) settleTx(ctx context.Context, row *idemtype.JobRow, fin, tf *store.JobFinishParams, handlerErr error) bool {
	if fin.State == idemtype.StateCompleted && store.SameResult(fin.Result, tf.Result) {
		return true
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TxReadTimeout)
	defer cancel()
	cur, err := e.cfg.Store.JobGet(rctx, &store.JobGetParams{ID: row.ID})
	if err != nil {
		e.cfg.Logger.Warn("read job completed in a transaction", "job", row.ID, "err", err)
		return false
	}
	if cur.State != idemtype.StateCompleted || cur.Attempt != row.Attempt {
		return false // rolled back (or not committed yet): the handler's outcome
	}
	e.cfg.Logger.Warn("handler returned something else after its JobCompleteTx committed; the job stays completed with the committed result",
		"job", row.ID, "kind", row.Kind, "handler_err", handlerErr)
	*fin = *tf
	return true
}

// NoteTxCompletion records that the handler of ctx's job wrote fin, the
// job's completion, in a transaction of its own (idem.JobCompleteTx):
// whether that transaction committed is known only once the handler has
// returned (settleTx). It does nothing outside a handler's context.
func NoteTxCompletion(ctx context.Context, fin *store.JobFinishParams) {
	if r, ok := ctx.Value(runningKey{}).(*running); ok {
		cp := *fin
		r.tx.Store(&cp)
	}
}

// callWithTimeout is callHandler under the job's timeout: the handler's
// context ends at the deadline with cause ErrJobTimeout, and an error
// returned after it wraps ErrJobTimeout (a panic's text stays first). A
// handler that ignores its context and succeeds anyway completes: its
// work is done.
func (e *Executor) callWithTimeout(ctx context.Context, row *idemtype.JobRow) ([]byte, error) {
	var d time.Duration
	if e.cfg.Timeout != nil {
		d = e.cfg.Timeout(row)
	}
	if d <= 0 {
		return e.callHandler(ctx, row)
	}
	tctx, cancel := context.WithTimeoutCause(ctx, d, idemtype.ErrJobTimeout)
	defer cancel()
	res, err := e.callHandler(tctx, row)
	if err != nil && errors.Is(context.Cause(tctx), idemtype.ErrJobTimeout) && !errors.Is(err, idemtype.ErrJobTimeout) {
		var pe *PanicError
		if errors.As(err, &pe) {
			err = &timedOutPanic{pe: pe, after: d}
		} else {
			err = fmt.Errorf("%w after %v: %w", idemtype.ErrJobTimeout, d, err)
		}
	}
	return res, err
}

// timedOutPanic is a handler's panic after its job's timeout: it is both
// the PanicError (so its finish is Panicked) and ErrJobTimeout, and its
// text is the panic's ("panic: …") with the timeout after the value,
// before the stack (which a long error may lose).
type timedOutPanic struct {
	pe    *PanicError
	after time.Duration
}

// Error is the panic's text with the timeout after its value.
func (e *timedOutPanic) Error() string {
	return fmt.Sprintf("panic: %v (%v after %v)\n%s", e.pe.Value, idemtype.ErrJobTimeout, e.after, e.pe.Stack)
}

// Unwrap makes it both the PanicError and ErrJobTimeout.
func (e *timedOutPanic) Unwrap() []error { return []error{e.pe, idemtype.ErrJobTimeout} }

// PanicError is a recovered handler panic. A failure whose error is one
// (errors.As) has its finish's Panicked set: the typed value, not the
// text, says that the handler panicked.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack string // the goroutine's stack at the panic
}

// Error includes the stack, which the attempt record keeps.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

// GoexitError is a handler that ended its goroutine with runtime.Goexit
// (t.FailNow, t.SkipNow, or a library calling it) instead of returning: its attempt fails, retried per the job's policy like any
// error.
type GoexitError struct {
	Stack string // the goroutine's stack as it ended, the Goexit call on it
}

// Error names Goexit and includes the stack, which the attempt record keeps.
func (e *GoexitError) Error() string {
	return "handler called runtime.Goexit instead of returning\n" + e.Stack
}

// SetOutcome fills fin with what follows an attempt of row that returned
// res and err: completed (with the result to cache for a keyed job), or for
// an error snoozed, cancelled, dead, or retryable with backoff (dead when
// attempts are exhausted). It is the one outcome rule of every kind of
// worker.
func (e *Executor) SetOutcome(fin *store.JobFinishParams, row *idemtype.JobRow, res []byte, err error) {
	if err == nil {
		e.complete(fin, row, res)
		return
	}
	e.fail(fin, row, err)
}

// complete fills fin for a successful attempt. The result is made storable
// first (see StorableResult): bytes that are not UTF-8 become U+FFFD, and a
// result that is not JSON fails the attempt permanently.
func (e *Executor) complete(fin *store.JobFinishParams, row *idemtype.JobRow, res []byte) {
	res, err := StorableResult(res)
	if err != nil {
		e.fail(fin, row, &idemtype.ControlError{Kind: idemtype.ControlPermanent, Err: err})
		return
	}
	fin.State, fin.Outcome, fin.Result = idemtype.StateCompleted, idemtype.OutcomeCompleted, res
	if row.IdempotencyKey == "" {
		return
	}
	stored := res
	if stored == nil {
		stored = []byte("null")
	}
	enc, err := EncodeResult(stored, e.cfg.CompressThreshold)
	if err != nil {
		e.cfg.Logger.Warn("encode result", "job", row.ID, "err", err)
	}
	fin.RecordResult, fin.RecordCompressed, fin.ResultHash = enc.Bytes, enc.Compressed, enc.Hash
	if e.debugEnabled() {
		var ms int64
		if row.StartedAt != nil {
			ms = e.cfg.Now().Sub(*row.StartedAt).Milliseconds()
		}
		e.debugKey("storing result in the cache", row, slog.Int("size_bytes", len(enc.Bytes)), slog.Int64("duration_ms", ms))
	}
}

// debugEnabled reports whether the logger takes debug records: the cache
// log of keyed jobs builds its attributes only then (a hot path).
func (e *Executor) debugEnabled() bool {
	return e.cfg.Logger.Enabled(context.Background(), slog.LevelDebug)
}

// debugKey logs msg at debug about keyed job row: its job id, key, tenant
// and kind, then extra.
func (e *Executor) debugKey(msg string, row *idemtype.JobRow, extra ...slog.Attr) {
	if !e.debugEnabled() {
		return
	}
	attrs := append([]slog.Attr{slog.Int64("job", row.ID), slog.String("key", row.IdempotencyKey),
		slog.String("tenant", row.Tenant), slog.String("kind", row.Kind)}, extra...)
	e.cfg.Logger.LogAttrs(context.Background(), slog.LevelDebug, msg, attrs...)
}

// fail fills fin for a failed attempt from the handler's error; a keyed
// job's failure is logged as not cached (a snooze is no failure).
func (e *Executor) fail(fin *store.JobFinishParams, row *idemtype.JobRow, err error) {
	e.setFailure(fin, row, err)
	if row.IdempotencyKey != "" && !fin.Snooze {
		e.debugKey("result failure not cached", row, slog.String("state", string(fin.State)), slog.String("err", fin.Error))
	}
}

// setFailure is fail's outcome rule.
func (e *Executor) setFailure(fin *store.JobFinishParams, row *idemtype.JobRow, err error) {
	now := e.cfg.Now()
	fin.Error, fin.ErrorCode = store.StorableError(err.Error()), store.StorableText(idemtype.ErrorCodeOf(err))
	var pe *PanicError
	fin.Panicked = errors.As(err, &pe) // a recovered panic, whatever the error's text
	var ce *idemtype.ControlError
	if errors.As(err, &ce) {
		switch ce.Kind {
		case idemtype.ControlSnooze:
			fin.State, fin.Outcome, fin.Snooze, fin.RunAt = idemtype.StateScheduled, idemtype.OutcomeSnoozed, true, now.Add(ce.After)
			fin.Error, fin.ErrorCode = "", ""
			return
		case idemtype.ControlCancel:
			fin.State, fin.Outcome = idemtype.StateCancelled, idemtype.OutcomeCancelled
			return
		case idemtype.ControlPermanent:
			fin.State, fin.Outcome = idemtype.StateDead, idemtype.OutcomeDead
			return
		case idemtype.ControlRetryAfter:
			retryOrDie(fin, row, now.Add(ce.After))
			return
		}
	}
	retryOrDie(fin, row, now.Add(e.cfg.RetryDelay(row)))
}

func retryOrDie(fin *store.JobFinishParams, row *idemtype.JobRow, at time.Time) {
	if row.Attempt >= row.MaxAttempts {
		fin.State, fin.Outcome = idemtype.StateDead, idemtype.OutcomeDead
		return
	}
	fin.State, fin.Outcome, fin.RunAt = idemtype.StateRetryable, idemtype.OutcomeFailed, at
}

// runningKey finds the running job of a handler's context.
type runningKey struct{}

// running is what a handler's context carries.
type running struct {
	exec *Executor
	row  *idemtype.JobRow
	// tx is the completion the handler wrote in its own transaction
	// (NoteTxCompletion), if any.
	tx atomic.Pointer[store.JobFinishParams]
}

// JobFromContext returns the executor and job of a handler's context; ok is
// false outside a handler.
func JobFromContext(ctx context.Context) (e *Executor, row *idemtype.JobRow, ok bool) {
	r, ok := ctx.Value(runningKey{}).(*running)
	if !ok {
		return nil, nil, false
	}
	return r.exec, r.row, true
}
