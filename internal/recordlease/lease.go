package recordlease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Records is what a lease needs of the store: the record methods of
// store.Records that take, keep and give up the execution lease of a key.
type Records interface {
	RecordAcquire(ctx context.Context, p *store.RecordAcquireParams) (*store.RecordAcquireResult, error)
	RecordComplete(ctx context.Context, p *store.RecordCompleteParams) error
	RecordRelease(ctx context.Context, p *store.RecordReleaseParams) error
	RecordRenew(ctx context.Context, p *store.RecordRenewParams) error
}

// Params names a record key and how long it is held and kept.
type Params struct {
	// Tenant scopes the record.
	Tenant string
	// Purpose is the key's namespace; Key is the caller's key in it.
	Purpose Purpose
	Key     string
	// Owner identifies the holder (a random token per execution).
	Owner string
	// Lease is how long the key is held without renewal; Hold renews it
	// every third of it. Must be positive.
	Lease time.Duration
	// TTL is how long a completed result is kept.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// renewed, when set (tests), receives the outcome of each renewal.
	renewed chan<- error
}

// Lease is the execution lease of one record key, held by Params.Owner.
// Exactly one of Complete and Release should end it.
type Lease struct {
	st    Records
	p     Params
	until time.Time // the lease's end as of its last acquire or renewal
}

// Acquire tries to take the execution lease of the key. When it is taken
// it returns the lease; otherwise it returns the record that holds the key
// (completed, with its result, or in progress, with its holder).
func Acquire(ctx context.Context, st Records, p *Params) (*Lease, *idemtype.Record, error) {
	if p.Lease <= 0 {
		return nil, nil, errors.New("record lease: lease must be positive")
	}
	l := &Lease{st: st, p: *p}
	if l.p.Now == nil {
		l.p.Now = time.Now
	}
	res, err := l.acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !res.Acquired {
		return nil, res.Record, nil
	}
	return l, nil, nil
}

// Resume returns the lease p.Owner took earlier (for instance in another
// HTTP request), to renew, complete or release it. Whether the owner still
// holds the key is checked by those calls, not here.
func Resume(st Records, p *Params) *Lease {
	l := &Lease{st: st, p: *p}
	if l.p.Now == nil {
		l.p.Now = time.Now
	}
	return l
}

// Tenant is the tenant of the leased key.
func (l *Lease) Tenant() string { return l.p.Tenant }

// Until is when the lease ends unless renewed, as of its last acquire or
// renewal.
func (l *Lease) Until() time.Time { return l.until }

// Renew extends the lease once to now + Params.Lease and returns its new
// end; ErrLost when the owner no longer holds the key (another owner took
// it, or the lease was released or completed: a renewal never takes the
// key again).
func (l *Lease) Renew(ctx context.Context) (time.Time, error) {
	if err := l.renew(ctx); err != nil {
		return time.Time{}, err
	}
	return l.until, nil
}

// StoredKey is the key of the lease as stored (with its namespace).
func (l *Lease) StoredKey() string { return Key(l.p.Purpose, l.p.Key) }

// acquire takes or renews the lease (RecordAcquire renews the lease of its
// owner).
func (l *Lease) acquire(ctx context.Context) (*store.RecordAcquireResult, error) {
	now := l.p.Now().UTC()
	res, err := l.st.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: l.p.Tenant, Key: l.StoredKey(),
		Owner: l.p.Owner, LeaseUntil: now.Add(l.p.Lease).Truncate(time.Microsecond), DedupUntil: now, ExpiresAt: now.Add(l.p.TTL), Now: now})
	if err != nil {
		return nil, fmt.Errorf("acquire key %q: %w", l.p.Key, err)
	}
	if res.Acquired && res.Record != nil && res.Record.LeaseUntil != nil {
		l.until = *res.Record.LeaseUntil
	}
	return res, nil
}

// ErrLost is what Hold reports when another owner took the key: the lease
// lapsed (a stall longer than the lease) and was taken over.
var ErrLost = fmt.Errorf("record lease: %w", idemtype.ErrLeaseLost)

// ErrLapsed is what Hold reports, wrapping the renewal's error, when a
// renewal failed and the lease has ended as last renewed (the store
// unreachable for a whole lease): another acquirer may have taken the key
// over, unseen from here. It wraps idemtype.ErrLeaseLost, as the
// heartbeater's rule for jobs: a holder whose lease lapsed stops its work.
var ErrLapsed = fmt.Errorf("record lease ended while its renewals failed: %w", idemtype.ErrLeaseLost)

// Hold renews the lease every third of its duration until stop is called
// (stop waits for the renewer to end; call it once). Each renewal is
// bounded (renewBound): one that the store does not answer in time has
// failed, its lease ended. When a renewal fails,
// onErr is called from the renewing goroutine with the error, ErrLost
// when another owner holds the key, ErrLapsed (wrapping the error) when
// the lease has ended as last renewed; renewal stops after ErrLost, and
// goes on after other errors (the store may recover: a lapsed lease that
// nobody took over is renewed again). onErr may be nil.
func (l *Lease) Hold(ctx context.Context, onErr func(error)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(max(l.p.Lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// Bounded: a renewal hung in a store that does not answer
			// would never tell of the lease's end (nor let stop return).
			rctx, cancel := context.WithTimeout(ctx, renewBound(l.p.Lease))
			err := l.renew(rctx)
			cancel()
			if err != nil && !errors.Is(err, ErrLost) && !l.until.IsZero() && !l.p.Now().Before(l.until) {
				err = fmt.Errorf("%w: %w", ErrLapsed, err)
			}
			if l.p.renewed != nil {
				select {
				case l.p.renewed <- err:
				case <-done:
				}
			}
			if err != nil && onErr != nil {
				onErr(err)
			}
			if errors.Is(err, ErrLost) {
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// renewBound is how long Hold waits for one renewal of a lease: the lease
// (a renewal unanswered for a lease from its start finds the lease ended,
// as last renewed before that start), but never less than a second, the
// shortest Config.LeaseDuration, so that a round trip slowed by load is not
// taken for a store that does not answer.
func renewBound(lease time.Duration) time.Duration { return max(lease, time.Second) }

// renew extends the lease once, only if the owner still holds it
// (RecordRenew): a renewal that arrives after the owner's own release or
// completion, or after a takeover, must not take the key back.
func (l *Lease) renew(ctx context.Context) error {
	now := l.p.Now().UTC()
	// The time the stores keep (microseconds), returned by Renew: the
	// caller compares it with the lease end read back later.
	until := now.Add(l.p.Lease).Truncate(time.Microsecond)
	var stored time.Time // the end stored, when the store's clock moved it
	err := l.st.RecordRenew(ctx, &store.RecordRenewParams{Tenant: l.p.Tenant, Key: l.StoredKey(),
		Owner: l.p.Owner, LeaseUntil: until, Now: now, Stored: &stored})
	if errors.Is(err, idemtype.ErrLeaseLost) {
		return ErrLost
	}
	if err != nil {
		return fmt.Errorf("renew key %q: %w", l.p.Key, err)
	}
	l.until = until
	if !stored.IsZero() {
		l.until = stored.UTC()
	}
	return nil
}

// Result is what Complete stores.
type Result struct {
	Bytes      []byte // the result as stored
	Compressed bool   // Bytes are compressed
	Hash       string // hex SHA-256 of the result
	Duration   time.Duration
	// At is when the result is stored (its record's completed time); zero
	// means the clock's now. The caller that reports the time passes the
	// one it reports.
	At time.Time
}

// Complete stores the result on the record and ends the lease. It fails
// with idemtype.ErrLeaseLost when the owner no longer holds the key.
func (l *Lease) Complete(ctx context.Context, r *Result) error {
	at := r.At
	if at.IsZero() {
		at = l.p.Now()
	}
	at = at.UTC()
	err := l.st.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: l.p.Tenant, Key: l.StoredKey(),
		Owner: l.p.Owner, Result: r.Bytes, Compressed: r.Compressed, ResultHash: r.Hash, TTL: l.p.TTL,
		DurationMS: r.Duration.Milliseconds(), Now: at})
	if err != nil {
		return fmt.Errorf("complete key %q: %w", l.p.Key, err)
	}
	return nil
}

// Release gives the key up without a result, so that the next acquirer
// runs again (failures are never cached).
func (l *Lease) Release(ctx context.Context) error {
	return l.release(ctx, false)
}

// Forget gives the key up as Release does and deletes its record: the
// answer was not worth keeping at all (store.RecordReleaseParams.Forget).
func (l *Lease) Forget(ctx context.Context) error {
	return l.release(ctx, true)
}

func (l *Lease) release(ctx context.Context, forget bool) error {
	p := &store.RecordReleaseParams{Tenant: l.p.Tenant, Key: l.StoredKey(), Owner: l.p.Owner, Forget: forget}
	if err := l.st.RecordRelease(ctx, p); err != nil {
		return fmt.Errorf("release key %q: %w", l.p.Key, err)
	}
	return nil
}

// Owner is the owner name under which the lease holds its key (a record
// read back holds the key for this lease when its LeaseOwner is Owner).
func (l *Lease) Owner() string { return l.p.Owner }
