package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// minKeyWait and maxKeyWait bound how long a job whose idempotency key is
// held by another live execution snoozes before it looks again.
const (
	minKeyWait = 50 * time.Millisecond
	maxKeyWait = 5 * time.Second
)

// execute runs one claimed job to its finish: from the result cache when its
// key holds a completed result, else through its handler.
func (rt *runtime) execute(ctx context.Context, j *runningJob) {
	row := j.row
	start := rt.c.now()
	fin := &store.JobFinishParams{ID: row.ID, LeaseToken: row.LeaseToken}
	if row.IdempotencyKey != "" {
		run, err := rt.acquireKey(ctx, row, j.key, fin)
		if err != nil {
			rt.c.logger.Warn("acquire idempotency key failed", "job", row.ID, "err", err)
			rt.failAttempt(row, fin, err, start)
			rt.finish(j, fin, start)
			return
		}
		if !run {
			rt.finish(j, fin, start)
			return
		}
		rt.c.stats.cacheMisses.Add(1)
		rt.c.observe(EventCacheMiss, row, nil)
	}
	ctx = context.WithValue(ctx, handlerKey{}, &handlerJob{rt: rt, row: row})
	res, err := rt.callHandler(ctx, row)
	if err == nil {
		rt.completeAttempt(row, fin, res)
	} else {
		rt.failAttempt(row, fin, err, start)
	}
	rt.finish(j, fin, start)
}

// keyParams is the execution-lease request for a keyed job.
func (rt *runtime) keyParams(row *JobRow, now time.Time) *store.RecordAcquireParams {
	lease := now.Add(rt.c.cfg.LeaseDuration)
	if row.LeaseExpiresAt != nil {
		lease = *row.LeaseExpiresAt
	}
	return &store.RecordAcquireParams{
		Tenant: row.Tenant, Key: row.IdempotencyKey, Owner: store.JobOwner(row.ID), JobID: row.ID,
		LeaseUntil: lease, DedupUntil: now, ExpiresAt: now.Add(rt.c.cfg.resultTTL(row.Kind)), Now: now}
}

// acquireKeys takes the execution leases of the keyed jobs of a claim in one
// store call; a failure leaves each job to try alone (nil entries).
func (rt *runtime) acquireKeys(ctx context.Context, jobs []*JobRow) map[int64]*store.RecordAcquireResult {
	now := rt.c.now()
	var rows []*JobRow
	var ps []*store.RecordAcquireParams
	for _, j := range jobs {
		if j.IdempotencyKey != "" {
			rows = append(rows, j)
			ps = append(ps, rt.keyParams(j, now))
		}
	}
	if len(ps) == 0 {
		return nil
	}
	res, err := rt.c.store.RecordAcquireMany(ctx, ps)
	if err != nil {
		rt.c.logger.Warn("acquire idempotency keys failed; trying one by one", "jobs", len(ps), "err", err)
		return nil
	}
	out := make(map[int64]*store.RecordAcquireResult, len(rows))
	for i, r := range rows {
		out[r.ID] = res[i]
	}
	return out
}

// acquireKey takes the execution lease of the job's key, unless res already
// holds the outcome of a batched acquire. It reports whether the handler
// should run; when not, fin is filled (cached or snoozed).
func (rt *runtime) acquireKey(ctx context.Context, row *JobRow, res *store.RecordAcquireResult, fin *store.JobFinishParams) (bool, error) {
	now := rt.c.now()
	if res == nil {
		var err error
		if res, err = rt.c.store.RecordAcquire(ctx, rt.keyParams(row, now)); err != nil {
			return false, fmt.Errorf("acquire key: %w", err)
		}
	}
	if res.Acquired {
		return true, nil
	}
	rec := res.Record
	if rec.Status == idemtype.RecordCompleted {
		out, err := decodeResult(rec.Result, rec.Compressed)
		if err != nil {
			return false, err
		}
		rt.c.stats.cacheHits.Add(1)
		rt.c.observe(EventCacheHit, row, nil)
		fin.State, fin.Outcome = StateCompleted, idemtype.OutcomeCached
		fin.Result, fin.WasCached, fin.OriginalJobID = nullIfEmpty(out), true, rec.ResultJobID
		return false, nil
	}
	wait := maxKeyWait
	if rec.LeaseUntil != nil {
		wait = min(max(rec.LeaseUntil.Sub(now), minKeyWait), maxKeyWait)
	}
	fin.State, fin.Outcome, fin.Snooze = StateScheduled, idemtype.OutcomeSnoozed, true
	fin.RunAt = now.Add(wait)
	fin.Error = fmt.Sprintf("idempotency key held by %s", rec.LeaseOwner)
	return false, nil
}

func nullIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// callHandler runs the job's handler, turning a panic into an error with the
// stack.
func (rt *runtime) callHandler(ctx context.Context, row *JobRow) (res []byte, err error) {
	h := rt.c.cfg.Workers.handler(row.Kind)
	if h == nil {
		return nil, fmt.Errorf("no worker registered for kind %q", row.Kind)
	}
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: string(debug.Stack())}
		}
	}()
	return h(ctx, row)
}

// panicError is a recovered handler panic.
type panicError struct {
	value any
	stack string
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.value, e.stack) }

// completeAttempt fills fin for a successful attempt.
func (rt *runtime) completeAttempt(row *JobRow, fin *store.JobFinishParams, res []byte) {
	fin.State, fin.Outcome, fin.Result = StateCompleted, idemtype.OutcomeCompleted, res
	if row.IdempotencyKey == "" {
		return
	}
	stored := res
	if stored == nil {
		stored = []byte("null")
	}
	enc, err := encodeResult(stored, rt.c.cfg.CompressThreshold)
	if err != nil {
		rt.c.logger.Warn("encode result", "job", row.ID, "err", err)
	}
	fin.RecordResult, fin.RecordCompressed, fin.ResultHash = enc.bytes, enc.compressed, enc.hash
}

// failAttempt fills fin for a failed attempt from the handler's error.
func (rt *runtime) failAttempt(row *JobRow, fin *store.JobFinishParams, err error, start time.Time) {
	now := rt.c.now()
	fin.Error = err.Error()
	var ce *controlError
	if errors.As(err, &ce) {
		switch ce.kind {
		case controlSnooze:
			fin.State, fin.Outcome, fin.Snooze, fin.RunAt = StateScheduled, idemtype.OutcomeSnoozed, true, now.Add(ce.after)
			fin.Error = ""
			return
		case controlCancel:
			fin.State, fin.Outcome = StateCancelled, idemtype.OutcomeCancelled
			return
		case controlPermanent:
			fin.State, fin.Outcome = StateDead, idemtype.OutcomeDead
			return
		case controlRetryAfter:
			rt.retryOrDie(row, fin, now.Add(ce.after))
			return
		}
	}
	delay := rt.c.cfg.retryPolicy(row).Delay(row.Attempt, jitter())
	rt.retryOrDie(row, fin, now.Add(delay))
}

func (rt *runtime) retryOrDie(row *JobRow, fin *store.JobFinishParams, at time.Time) {
	if row.Attempt >= row.MaxAttempts {
		fin.State, fin.Outcome = StateDead, idemtype.OutcomeDead
		return
	}
	fin.State, fin.Outcome, fin.RunAt = StateRetryable, idemtype.OutcomeFailed, at
}

// finish hands fin to the completer unless the lease was lost meanwhile.
func (rt *runtime) finish(j *runningJob, fin *store.JobFinishParams, start time.Time) {
	now := rt.c.now()
	fin.FinishedAt, fin.DurationMS = now, now.Sub(start).Milliseconds()
	rt.mu.Lock()
	lost := j.lost
	rt.mu.Unlock()
	if lost {
		return
	}
	rt.c.observeFinish(j.row, fin)
	// Hand the finish over without waiting for its commit: the worker slot is
	// free at once (the lease stays until the commit, so nothing else can
	// claim the job meanwhile), and the completer batches commits.
	rt.completer.submit(fin)
}

// completer batches the finishes of concurrent executors into one store call.
type completer struct {
	store  store.Store
	logger *slog.Logger
	reqs   chan *store.JobFinishParams
	wg     sync.WaitGroup

	mu     sync.RWMutex // guards closed against sends on a closed reqs
	closed bool
}

// completerLoops is how many batches may be in flight at once.
const (
	completerLoops    = 2
	completerMaxBatch = 500
	finishTries       = 5
)

func newCompleter(st store.Store, logger *slog.Logger) *completer {
	c := &completer{store: st, logger: logger, reqs: make(chan *store.JobFinishParams, completerMaxBatch)}
	for range completerLoops {
		c.wg.Add(1)
		go c.loop()
	}
	return c
}

// submit queues one finish without waiting for it; the completer logs its
// outcome.
func (c *completer) submit(p *store.JobFinishParams) {
	if !c.enqueue(p) {
		c.logger.Info("finish dropped: client stopped", "job", p.ID)
	}
}

func (c *completer) enqueue(p *store.JobFinishParams) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.reqs <- p
	return true
}

// report logs the outcome of one finish that failed.
func (c *completer) report(p *store.JobFinishParams, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrLeaseLost):
		c.logger.Info("finish dropped: lease lost", "job", p.ID)
	default:
		c.logger.Error("finish failed; the rescuer will retry the job", "job", p.ID, "err", err)
	}
}

func (c *completer) loop() {
	defer c.wg.Done()
	for first := range c.reqs {
		batch := []*store.JobFinishParams{first}
	drain:
		for len(batch) < completerMaxBatch {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		c.flush(batch)
	}
}

// flush writes one batch, retrying whole-batch failures a few times.
func (c *completer) flush(batch []*store.JobFinishParams) {
	var errs []error
	var err error
	for try := range finishTries {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs, err = c.store.JobFinishMany(ctx, batch)
		cancel()
		if err == nil {
			break
		}
		c.logger.Warn("finish batch failed", "jobs", len(batch), "try", try+1, "err", err)
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
	}
	for i, p := range batch {
		switch {
		case err != nil:
			c.report(p, err)
		case i < len(errs):
			c.report(p, errs[i])
		}
	}
}

// stop waits for queued finishes to be written; idempotent. Later finishes
// are dropped (their leases were released at shutdown).
func (c *completer) stop() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	c.wg.Wait()
}
