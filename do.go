package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
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
// Failures are never cached: fn's error releases the key.
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context) (any, error), opts *DoOpts) (*DoResult, error) {
	if err := ValidateKey("key", key); err != nil {
		return nil, err
	}
	o := DoOpts{}
	if opts != nil {
		o = *opts
	}
	o.Tenant = c.tenant(o.Tenant)
	setDefault(&o.TTL, c.cfg.ResultTTL)
	setDefault(&o.Lease, c.cfg.LeaseDuration)
	owner := "do:" + store.NewToken()
	deadline := c.now().Add(o.Wait)
	for {
		res, err := c.doAcquire(ctx, key, owner, o)
		if err != nil {
			return nil, err
		}
		if res.Acquired {
			return c.doRun(ctx, key, owner, o, fn)
		}
		rec := res.Record
		if rec.Status == idemtype.RecordCompleted {
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

func (c *Client) doAcquire(ctx context.Context, key, owner string, o DoOpts) (*store.RecordAcquireResult, error) {
	now := c.now()
	res, err := c.store.RecordAcquire(ctx, &store.RecordAcquireParams{
		Tenant: o.Tenant, Key: key, Owner: owner, LeaseUntil: now.Add(o.Lease),
		DedupUntil: now, ExpiresAt: now.Add(o.TTL), Now: now})
	if err != nil {
		return nil, fmt.Errorf("do %q: %w", key, err)
	}
	return res, nil
}

// doRun runs fn holding the lease (renewed every third of it) and stores the
// result, or releases the key on failure.
func (c *Client) doRun(ctx context.Context, key, owner string, o DoOpts, fn func(ctx context.Context) (any, error)) (*DoResult, error) {
	c.stats.cacheMisses.Add(1)
	c.cfg.Logger.Debug("result cache miss", "key", key, "tenant", o.Tenant)
	start := c.now()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		t := time.NewTicker(o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			res, err := c.doAcquire(runCtx, key, owner, o)
			if err == nil && !res.Acquired {
				cancel(ErrLeaseLost)
				return
			}
		}
	}()
	v, err := c.callDo(runCtx, fn)
	cancel(nil)
	<-renewDone
	if err == nil {
		var out json.RawMessage
		if out, err = marshalResult(v); err == nil {
			return c.doStore(ctx, key, owner, o, out, start)
		}
	}
	if rerr := c.store.RecordRelease(context.WithoutCancel(ctx), &store.RecordReleaseParams{Tenant: o.Tenant, Key: key, Owner: owner}); rerr != nil {
		err = errors.Join(err, fmt.Errorf("release key: %w", rerr))
	}
	c.cfg.Logger.Debug("result failure not cached", "key", key, "tenant", o.Tenant, "err", err)
	return nil, err
}

func (c *Client) callDo(ctx context.Context, fn func(ctx context.Context) (any, error)) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in Do: %v", r)
		}
	}()
	return fn(ctx)
}

func (c *Client) doStore(ctx context.Context, key, owner string, o DoOpts, out json.RawMessage, start time.Time) (*DoResult, error) {
	stored := out
	if stored == nil {
		stored = json.RawMessage("null")
	}
	enc, err := encodeResult(stored, c.cfg.CompressThreshold)
	if err != nil {
		return nil, err
	}
	now := c.now()
	err = c.store.RecordComplete(context.WithoutCancel(ctx), &store.RecordCompleteParams{
		Tenant: o.Tenant, Key: key, Owner: owner, Result: enc.bytes, Compressed: enc.compressed,
		ResultHash: enc.hash, TTL: o.TTL, DurationMS: now.Sub(start).Milliseconds(), Now: now})
	if err != nil {
		return nil, fmt.Errorf("do %q: store result: %w", key, err)
	}
	d := now.Sub(start).Truncate(time.Millisecond)
	c.cfg.Logger.Debug("result stored", "key", key, "tenant", o.Tenant, "duration_ms", d.Milliseconds())
	return &DoResult{Result: stored, Key: key, StoredAt: &now, Duration: d}, nil
}
