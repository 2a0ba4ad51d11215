package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/recordlease"
	"github.com/idem-dev/idem/store"
)

// The result-cache lease is Do taken apart for callers that cannot pass a
// function (other languages over HTTP, seed 000's GetCachedResult /
// StoreCachedResult): ResultLeaseAcquire returns the cached result or a
// lease token; the holder runs the work and calls ResultLeaseComplete with
// the result, or ResultLeaseRelease when the work failed (failures are never
// cached), and ResultLeaseRenew while it runs longer than the lease. The
// semantics are Do's: one live holder per key, an expired holder is taken
// over, a completed result is served until its TTL ends. Keys share Do's
// records (Do's namespace, apart from job keys).

// ResultLeaseOpts are the options of ResultLeaseAcquire; nil means every
// default.
type ResultLeaseOpts struct {
	Tenant string        // default Config.Tenant
	Lease  time.Duration // how long the lease lasts unless renewed; default Config.LeaseDuration; negative is ErrInvalid
	TTL    time.Duration // how long a completed result is kept; default Config.ResultTTL; negative is ErrInvalid
}

// ResultLease is the outcome of ResultLeaseAcquire: either the cached result
// (Cached) or a lease (Token, Until) to run the work under.
type ResultLease struct {
	Key string
	// Cached is set when the key already holds a completed result; the
	// work must not run.
	Cached *DoResult
	// Token identifies the lease; "" when Cached.
	Token string
	Until time.Time
}

// resultLeaseOwner is the record owner of a lease token.
func resultLeaseOwner(token string) string { return "lease:" + token }

// resultLeaseParams are the record-lease parameters of a result lease: Do's
// namespace, the owner of token.
func (c *Client) resultLeaseParams(tenant, key, token string, lease, ttl time.Duration) *recordlease.Params {
	setDefault(&lease, c.cfg.LeaseDuration)
	setDefault(&ttl, c.cfg.ResultTTL)
	return &recordlease.Params{Tenant: c.tenant(tenant), Purpose: recordlease.PurposeDo, Key: key,
		Owner: resultLeaseOwner(token), Lease: lease, TTL: ttl, Now: c.now}
}

// ResultLeaseAcquire returns the key's cached result, or takes its
// execution lease. A key held by another live lease (or a running Do) is
// ErrKeyInProgress.
func (c *Client) ResultLeaseAcquire(ctx context.Context, key string, opts *ResultLeaseOpts) (*ResultLease, error) {
	if err := ValidateKey("key", key); err != nil {
		return nil, err
	}
	o := ResultLeaseOpts{}
	if opts != nil {
		o = *opts
	}
	// Do's rule: a negative lease failed unclassified in the record
	// lease, and a negative TTL was silently the default.
	switch {
	case o.Lease < 0:
		return nil, idemtype.Invalid("lease", "must not be negative (0 = Config.LeaseDuration)")
	case o.TTL < 0:
		return nil, idemtype.Invalid("ttl", "must not be negative (0 = Config.ResultTTL)")
	}
	// The token carries the time the lease was taken (hex unix ms), so
	// Complete can report how long the work took without a column, and
	// the result TTL and lease asked for here (hex ms, 0 for none), so
	// Complete and Renew use them when they name none.
	token := strconv.FormatInt(c.now().UnixMilli(), 16) + "." + store.NewToken()
	if o.TTL > 0 || o.Lease > 0 {
		token += "." + strconv.FormatInt(max(o.TTL.Milliseconds(), 0), 16) +
			"." + strconv.FormatInt(max(o.Lease.Milliseconds(), 0), 16)
	}
	p := c.resultLeaseParams(o.Tenant, key, token, o.Lease, o.TTL)
	lease, rec, err := recordlease.Acquire(ctx, c.store, p)
	if err != nil {
		return nil, fmt.Errorf("lease %q: %w", key, err)
	}
	if lease != nil {
		c.stats.cacheMisses.Add(1)
		c.observeDo(EventCacheMiss, p.Tenant)
		c.cfg.Logger.Debug("result cache miss", "key", key, "tenant", p.Tenant)
		return &ResultLease{Key: key, Token: token, Until: lease.Until()}, nil
	}
	if rec.Status != idemtype.RecordCompleted {
		return nil, fmt.Errorf("lease %q: %w", key, ErrKeyInProgress)
	}
	c.observeDo(EventCacheHit, p.Tenant)
	cached, err := c.cachedDoResult(key, rec)
	if err != nil {
		return nil, err
	}
	return &ResultLease{Key: key, Cached: cached}, nil
}

// ResultLeaseRenew extends the lease of token to now + lease (0 = the lease
// given to ResultLeaseAcquire, else Config.LeaseDuration) and returns its
// new end. A lease taken over by
// another holder is ErrLeaseLost.
func (c *Client) ResultLeaseRenew(ctx context.Context, tenant, key, token string, lease time.Duration) (time.Time, error) {
	if err := validateLease(key, token); err != nil {
		return time.Time{}, err
	}
	if lease <= 0 {
		_, lease = tokenDurations(token)
	}
	until, err := recordlease.Resume(c.store, c.resultLeaseParams(tenant, key, token, lease, 0)).Renew(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("renew %q: %w", key, err)
	}
	return until, nil
}

// ResultLeaseComplete stores result (JSON; nil = null) as the key's result
// for ttl (0 = the TTL given to ResultLeaseAcquire, else Config.ResultTTL)
// and ends the lease. duration is how long
// the work took (0 = since the lease was taken). A lease lost to another
// holder is ErrLeaseLost and stores nothing. The store call is bounded by a
// third of Config.LeaseDuration; when it fails (or answers after that),
// the record is read back, and a completion that committed all the same is
// a success.
func (c *Client) ResultLeaseComplete(ctx context.Context, tenant, key, token string, result json.RawMessage, ttl, duration time.Duration) (*DoResult, error) {
	if err := validateLease(key, token); err != nil {
		return nil, err
	}
	if result != nil {
		// The rule of a job's result: a cached result is served back to
		// every later caller of the key.
		if err := ValidateJSON("result", result); err != nil {
			return nil, err
		}
	}
	if duration <= 0 {
		duration = leaseAge(token, c.now())
	}
	if ttl <= 0 {
		ttl, _ = tokenDurations(token)
	}
	lease := recordlease.Resume(c.store, c.resultLeaseParams(tenant, key, token, 0, ttl))
	res, hash, err := c.doStore(ctx, key, lease, c.storeBound(), result, c.now().Add(-duration))
	if err != nil && res != nil && c.readRecord(ctx, lease, c.storeBound()).holds(res, hash) {
		// The completion committed, but its answer failed (came after the
		// bound, or the connection was lost): the record read back holds
		// this result, which every acquirer of the key is now served.
		c.cfg.Logger.Info("result stored although the store's answer failed; read back",
			"key", key, "tenant", lease.Tenant(), "err", err)
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ResultLeaseRelease gives the key up after failed work: nothing is cached
// and the next acquirer runs the work. Releasing a lease no longer held
// changes nothing.
func (c *Client) ResultLeaseRelease(ctx context.Context, tenant, key, token string) error {
	if err := validateLease(key, token); err != nil {
		return err
	}
	p := c.resultLeaseParams(tenant, key, token, 0, 0)
	if err := recordlease.Resume(c.store, p).Release(ctx); err != nil {
		return fmt.Errorf("release %q: %w", key, err)
	}
	c.cfg.Logger.Debug("result failure not cached", "key", key, "tenant", p.Tenant)
	return nil
}

func validateLease(key, token string) error {
	if err := ValidateKey("key", key); err != nil {
		return err
	}
	if token == "" || len(token) > 128 || ValidateKey("lease_token", token) != nil {
		return idemtype.Invalid("lease_token", "must be the token of an acquired lease")
	}
	return nil
}

// cachedDoResult is the DoResult of a completed record.
func (c *Client) cachedDoResult(key string, rec *idemtype.Record) (*DoResult, error) {
	out, err := decodeResult(rec.Result, rec.Compressed)
	if err != nil {
		return nil, err
	}
	c.stats.cacheHits.Add(1)
	c.cfg.Logger.Debug("result cache hit", "key", key, "tenant", rec.Tenant, "original_job", rec.ResultJobID)
	return &DoResult{Result: out, WasCached: true, Key: key, OriginalJobID: rec.ResultJobID,
		StoredAt: rec.CompletedAt, Duration: time.Duration(rec.DurationMS) * time.Millisecond}, nil
}

// leaseAge is how long ago the lease of token was taken; 0 when the token
// does not carry the time.
func leaseAge(token string, now time.Time) time.Duration {
	ms, _, ok := strings.Cut(token, ".")
	if !ok {
		return 0
	}
	at, err := strconv.ParseInt(ms, 16, 64)
	if err != nil {
		return 0
	}
	return max(now.Sub(time.UnixMilli(at)), 0)
}

// tokenDurations are the result TTL and the lease the acquire of token
// asked for; 0 for what it did not ask (or a token that does not carry them).
func tokenDurations(token string) (ttl, lease time.Duration) {
	parts := strings.Split(token, ".")
	if len(parts) != 4 {
		return 0, 0
	}
	return hexMillis(parts[2]), hexMillis(parts[3])
}

// hexMillis parses a positive duration in hex milliseconds; 0 otherwise.
func hexMillis(s string) time.Duration {
	ms, err := strconv.ParseInt(s, 16, 64)
	if err != nil || ms <= 0 || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}
