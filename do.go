package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/recordlease"
	"github.com/idem-dev/idem/store"
)

// DoOpts are the options of Do; nil means every default.
type DoOpts struct {
	Tenant string        // default Config.Tenant
	TTL    time.Duration // how long the result is cached; default Config.ResultTTL
	Lease  time.Duration // execution lease, renewed while fn runs; default Config.LeaseDuration
	// Wait is how long to wait for another holder of the key to finish
	// before giving up with ErrKeyInProgress; 0 = do not wait.
	Wait time.Duration
}

// minDoLease is the shortest DoOpts.Lease: the lease is renewed every
// third of it, and a store round trip takes about a millisecond.
const minDoLease = 10 * time.Millisecond

// DoResult is what Do returns (seed 000's cache result: WasCached, Key,
// OriginalJobId, ExecutionTimeMs).
type DoResult struct {
	Result    json.RawMessage
	WasCached bool   // fn did not run: the key's result was cached
	Key       string // the idempotency key
	// OriginalJobID is the job whose result this is when a job stored it;
	// 0 when Do (or a result lease) stored it.
	OriginalJobID int64
	// StoredAt is when the result was stored.
	StoredAt *time.Time
	// Duration is how long the run that produced the result took.
	Duration time.Duration
}

// Do runs fn at most once per key while its result is kept: a completed
// result is returned from the cache without calling fn; a key held by a
// live execution elsewhere waits up to opts.Wait, then fails with
// ErrKeyInProgress; an expired holder (a crashed process) is taken over.
// Failures are never cached: fn's error, or the store's failure to keep
// fn's result (Do then returns ErrResultNotStored wrapping the store's
// error), releases the key; so does a
// panic in fn (an error "panic in Do: …") and a runtime.Goexit (t.FailNow),
// which then ends the caller's goroutine as it would without Do. fn's context
// is cancelled (cause ErrLeaseLost) when the key is taken over, or when
// the lease ends while its renewals fail (another process may take it
// over): fn should stop then, as a job's handler does, and Do's error
// wraps ErrLeaseLost.
//
// Once fn has returned (or panicked, or called runtime.Goexit), storing its
// result and giving the key back are each bounded by a third of
// Config.LeaseDuration (as the runtime bounds a job key's give-back), also
// when ctx has ended, so that a store that does not answer holds the
// caller no longer than that. A store call that fails or answers after its
// bound may still have committed: Do then reads the record back (bounded
// too). A result the record holds as this run stored it is Do's success
// (the next Do of the key is served it); a key no longer held by this run
// was given back. A release that failed so is logged (slog, Warn) and the
// key stays held until its lease ends, when another Do takes it over.
// fn's error, panic or Goexit reaches the caller all the same.
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context) (any, error), opts *DoOpts) (*DoResult, error) {
	if err := ValidateKey("key", key); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, idemtype.Invalid("fn", "required")
	}
	o := DoOpts{}
	if opts != nil {
		o = *opts
	}
	o.Tenant = c.tenant(o.Tenant)
	setDefault(&o.TTL, c.cfg.ResultTTL)
	setDefault(&o.Lease, c.cfg.LeaseDuration)
	switch {
	case o.Lease < minDoLease:
		return nil, idemtype.Invalid("lease", "must be at least %v (0 = Config.LeaseDuration)", minDoLease)
	case o.TTL < 0:
		return nil, idemtype.Invalid("ttl", "must not be negative")
	case o.Wait < 0:
		return nil, idemtype.Invalid("wait", "must not be negative")
	}
	p := &recordlease.Params{Tenant: o.Tenant, Purpose: recordlease.PurposeDo, Key: key,
		Owner: "do:" + store.NewToken(), Lease: o.Lease, TTL: o.TTL, Now: c.now}
	deadline := c.now().Add(o.Wait)
	for {
		lease, rec, err := recordlease.Acquire(ctx, c.store, p)
		if err != nil {
			return nil, fmt.Errorf("do %q: %w", key, err)
		}
		if lease != nil {
			c.observeDo(EventCacheMiss, o.Tenant)
			return c.doRun(ctx, key, lease, c.storeBound(), fn)
		}
		if rec.Status == idemtype.RecordCompleted {
			c.observeDo(EventCacheHit, o.Tenant)
			return c.cachedDoResult(key, rec)
		}
		now := c.now()
		if !now.Before(deadline) {
			return nil, fmt.Errorf("do %q: %w", key, ErrKeyInProgress)
		}
		wait := min(deadline.Sub(now), 20*time.Millisecond)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// doRun runs fn holding the lease (renewed every third of it; fn's context
// is cancelled with ErrLeaseLost if another owner takes the key, or if the
// lease ends while its renewals fail) and
// stores the result, or releases the key on failure (fn's, or the store's
// to keep the result). bound limits each of those two store calls (they
// run after ctx may have ended: without ctx's cancellation).
func (c *Client) doRun(ctx context.Context, key string, lease *recordlease.Lease, bound time.Duration, fn func(ctx context.Context) (any, error)) (*DoResult, error) {
	c.stats.cacheMisses.Add(1)
	c.cfg.Logger.Debug("result cache miss", "key", key, "tenant", lease.Tenant())
	start := c.now()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := lease.Hold(runCtx, func(err error) {
		// Taken over, or lapsed while renewals failed (taken over, maybe,
		// unseen from here): fn stops, as a job's handler does.
		if errors.Is(err, recordlease.ErrLost) || errors.Is(err, recordlease.ErrLapsed) {
			cancel(ErrLeaseLost)
		}
	})
	returned := false
	defer func() {
		if !returned {
			// fn called runtime.Goexit (t.FailNow): the caller's goroutine
			// ends, as it would without Do; the key is given back, as for
			// fn's failure, instead of held until its lease ends. The
			// renewer is cancelled before it is waited for: a renewal
			// hung in a store that does not answer would hold the
			// goroutine for ever.
			cancel(nil)
			stop()
			_, _ = c.doRelease(ctx, key, lease, bound, "called runtime.Goexit")
		}
	}()
	v, err := c.callDo(runCtx, fn)
	returned = true
	if err != nil && !errors.Is(err, ErrLeaseLost) && errors.Is(context.Cause(runCtx), ErrLeaseLost) {
		// fn stopped for the lost lease, saying only context.Canceled:
		// the caller's context did not end, so Do says why.
		err = fmt.Errorf("do %q: %w: %w", key, ErrLeaseLost, err)
	}
	cancel(nil)
	stop()
	if err == nil {
		var out json.RawMessage
		if out, err = marshalResult(v); err == nil {
			return c.doKeep(ctx, key, lease, bound, out, start)
		}
	}
	if _, rerr := c.doRelease(ctx, key, lease, bound, "failed"); rerr != nil {
		err = errors.Join(err, rerr)
	}
	c.cfg.Logger.Debug("result failure not cached", "key", key, "tenant", lease.Tenant(), "err", err)
	return nil, err
}

// ErrResultNotStored is Do's error when fn succeeded but its result could
// not be stored (it could not be encoded, or the store failed or did not
// answer within the bound and the record read back does not hold the
// result): nothing is cached, the
// key is given back, and the next Do of the key runs fn again. The error
// also wraps the store's (context.DeadlineExceeded for a store that did
// not answer in time, ErrLeaseLost when the key was taken over).
var ErrResultNotStored = errors.New("result not stored")

// doKeep stores fn's result out (doStore). When the store fails or does
// not answer in time, the completion may still have committed (a store
// that answers late, a connection lost after the commit): the key is given
// back first — a completion that committed holds no lease, so the release
// changes nothing; one that did not can no longer commit, its owner gone —
// and the record is then read back: when it holds this run's result
// (its hash, stored at the time this run stored it), Do succeeds with it,
// as the next Do of the key would be served it. Otherwise the result was
// not stored: ErrResultNotStored, wrapping the store's error (and the
// release's, if the key could not be given back).
func (c *Client) doKeep(ctx context.Context, key string, lease *recordlease.Lease, bound time.Duration, out json.RawMessage, start time.Time) (*DoResult, error) {
	res, hash, err := c.doStore(ctx, key, lease, bound, out, start)
	if err == nil {
		return res, nil
	}
	read, rerr := c.doRelease(ctx, key, lease, bound, "succeeded, its result not stored")
	if res != nil {
		if read == nil {
			read = c.readRecord(ctx, lease, bound)
		}
		if read.holds(res, hash) {
			c.cfg.Logger.Info("result stored although the store's answer failed; read back",
				"key", key, "tenant", lease.Tenant(), "err", err)
			return res, nil
		}
	}
	err = fmt.Errorf("%w: %w", ErrResultNotStored, err) // err names the key
	if rerr != nil {
		err = errors.Join(err, rerr)
	}
	c.cfg.Logger.Debug("result failure not cached", "key", key, "tenant", lease.Tenant(), "err", err)
	return nil, err
}

// storeBound bounds a store call made for a caller whose context may have
// ended (it runs without the cancellation): a third of
// Config.LeaseDuration, the bound of a job key's give-back.
func (c *Client) storeBound() time.Duration { return c.cfg.LeaseDuration / 3 }

// doRelease gives the key of a failed Do back, within bound (without ctx's
// cancellation: the caller's context may have ended). When the release
// fails (the store did not answer in time, or the connection was lost),
// it may still have committed: the record is read back (bounded too), and
// a key no longer held by the lease was given back — no error. Otherwise
// the failure is logged (the key stays held until its lease ends) and
// returned. The record read back is returned (nil when the release
// succeeded and nothing was read).
func (c *Client) doRelease(ctx context.Context, key string, lease *recordlease.Lease, bound time.Duration, why string) (*recordRead, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	err := lease.Release(rctx)
	if err == nil {
		return nil, nil
	}
	read := c.readRecord(ctx, lease, bound)
	if read.err == nil && read.rec.LeaseOwner != lease.Owner() || errors.Is(read.err, idemtype.ErrNotFound) {
		c.cfg.Logger.Debug("key of a Do given back although the store's answer failed; read back",
			"key", key, "tenant", lease.Tenant(), "err", err)
		return read, nil
	}
	c.cfg.Logger.Warn("could not give back the key of a Do; it stays held until its lease ends",
		"key", key, "tenant", lease.Tenant(), "lease_until", lease.Until(), "fn", why, "err", err)
	return read, fmt.Errorf("do %q: %w", key, err)
}

// recordRead is the outcome of reading a leased key's record back.
type recordRead struct {
	rec *idemtype.Record
	err error
}

// readRecord reads the record of lease's key within bound (without ctx's
// cancellation).
func (c *Client) readRecord(ctx context.Context, lease *recordlease.Lease, bound time.Duration) *recordRead {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	rec, err := c.store.RecordGet(rctx, &store.RecordGetParams{Tenant: lease.Tenant(), Key: lease.StoredKey(), Now: c.now()})
	if err != nil {
		err = fmt.Errorf("read back key %q: %w", lease.StoredKey(), err)
	}
	return &recordRead{rec: rec, err: err}
}

// holds reports whether the record read holds the result res (hash) as
// doStore stored it: completed with its hash at its StoredAt (microseconds,
// as stored; another run's completion of the key has its own time).
func (r *recordRead) holds(res *DoResult, hash string) bool {
	if r.err != nil || r.rec == nil || res.StoredAt == nil {
		return false
	}
	rec := r.rec
	return rec.Status == idemtype.RecordCompleted && rec.ResultHash == hash &&
		rec.CompletedAt != nil && rec.CompletedAt.Equal(*res.StoredAt)
}

// callDo runs fn, turning a panic into an error. recover is nil for a
// panic(nil) under GODEBUG=panicnil=1, which it stops, as during a
// runtime.Goexit (which goes on: doRun gives the key back): fn's not
// returning is what tells a panic.
func (c *Client) callDo(ctx context.Context, fn func(ctx context.Context) (any, error)) (v any, err error) {
	returned := false
	defer func() {
		if r := recover(); r != nil || !returned {
			v, err = nil, fmt.Errorf("panic in Do: %v", r)
		}
	}()
	v, err = fn(ctx)
	returned = true
	return v, err
}

// doStore stores the result out of the lease's run within bound (without
// ctx's cancellation). It returns the DoResult the store was asked to keep
// and the result's hash, also when the store call failed (nil when the
// result could not be encoded): the caller reads the record back then.
func (c *Client) doStore(ctx context.Context, key string, lease *recordlease.Lease, bound time.Duration, out json.RawMessage, start time.Time) (*DoResult, string, error) {
	stored := out
	if stored == nil {
		stored = json.RawMessage("null")
	}
	enc, err := encodeResult(stored, c.cfg.CompressThreshold)
	if err != nil {
		return nil, "", fmt.Errorf("do %q: encode result: %w", key, err)
	}
	// StoredAt is the time stored (microseconds, the stores' precision):
	// the caller compares it with the record read back later.
	// start is cut the same way, so that a duration the caller gave
	// (ResultLeaseComplete: start = now - duration) is not read back a
	// millisecond short by a now whose nanoseconds were cut.
	now := c.now().Truncate(time.Microsecond)
	d := now.Sub(start.Truncate(time.Microsecond)).Truncate(time.Millisecond)
	res := &DoResult{Result: stored, Key: key, StoredAt: &now, Duration: d}
	// Bounded, as the release is: the caller's context may have ended, and
	// a store that does not answer must not hold the caller for ever.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	err = lease.Complete(cctx, &recordlease.Result{Bytes: enc.bytes,
		Compressed: enc.compressed, Hash: enc.hash, Duration: d, At: now})
	if err != nil {
		return res, enc.hash, fmt.Errorf("do %q: store result: %w", key, err)
	}
	c.cfg.Logger.Debug("result stored", "key", key, "tenant", lease.Tenant(), "duration_ms", d.Milliseconds())
	return res, enc.hash, nil
}

// DoRecordGet returns the live record of a Do key. Do keys have a namespace
// of their own, apart from job idempotency keys (RecordGet reads those): a
// job and a Do call with the same key never share a result.
func (c *Client) DoRecordGet(ctx context.Context, tenant, key string) (*Record, error) {
	return c.RecordGet(ctx, tenant, recordlease.Key(recordlease.PurposeDo, key))
}

// DoRecordDelete deletes the record of a Do key, so the next Do with it
// runs fn again; ErrKeyInProgress while a Do of the key runs (RecordDelete).
func (c *Client) DoRecordDelete(ctx context.Context, tenant, key string) error {
	return c.RecordDelete(ctx, tenant, recordlease.Key(recordlease.PurposeDo, key))
}
