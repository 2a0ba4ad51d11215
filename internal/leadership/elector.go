// Package leadership elects one node to run the services that must run once
// (rescuer, retention, promoter, scheduler) through the store's leader row
// with expiry. A dead leader's term runs out and another node takes over
// within one TTL.
package leadership

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/internal/testsignal"
	"github.com/idem-dev/idem/store"
)

// DefaultTTL is the length of a leader's term; it is renewed every TTL/3.
const DefaultTTL = 10 * time.Second

// Config configures an Elector.
type Config struct {
	Name   string        // the election; default "maintenance"
	Owner  string        // this node; required
	TTL    time.Duration // default DefaultTTL
	Now    func() time.Time
	Logger *slog.Logger
}

// Elector keeps trying to lead and reports whether it does.
type Elector struct {
	startstop.BaseStartStop
	store  store.Leader
	cfg    Config
	leader atomic.Bool
	// termEnd is when the term won at the last successful attempt ends
	// (the attempt's start + TTL, in UnixNano of cfg.Now): IsLeader is
	// false after it even if no attempt has ended since (a stalled
	// renewal), because another node may lead by then.
	termEnd atomic.Int64
	// mayLead: the last attempt won a term, or failed, so that the store
	// may hold a term of this owner that no attempt reported (a renewal
	// whose answer a cancellation lost); Stop then resigns.
	mayLead atomic.Bool

	// TestSignals tell tests about campaigns; inert unless initialised.
	TestSignals struct {
		Attempted testsignal.Signal[bool] // an attempt ended; true = leads
	}
}

// New returns an elector; Owner must be set.
func New(st store.Leader, cfg Config) *Elector {
	if cfg.Name == "" {
		cfg.Name = "maintenance"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Elector{store: st, cfg: cfg}
}

// IsLeader reports whether this node led at its last attempt and that
// attempt's term has not run out: a renewal that stalls past the term
// (a slow or unreachable store) makes it false, as another node may
// take over then.
func (e *Elector) IsLeader() bool {
	return e.leader.Load() && e.cfg.Now().UnixNano() < e.termEnd.Load()
}

// RunOnce makes one election attempt.
func (e *Elector) RunOnce(ctx context.Context) (bool, error) {
	start := e.cfg.Now()
	ok, err := e.store.LeaderAttempt(ctx, &store.LeaderParams{
		Name: e.cfg.Name, Owner: e.cfg.Owner, TTL: e.cfg.TTL, Now: start.UTC()})
	if err != nil {
		ok = false
	}
	e.mayLead.Store(ok || err != nil)
	if ok {
		// The store's term runs from the attempt's Now; counting from the
		// attempt's start never outlives it.
		e.termEnd.Store(start.Add(e.cfg.TTL).UnixNano())
	}
	if was := e.leader.Swap(ok); was != ok {
		e.cfg.Logger.Info("leadership changed", "election", e.cfg.Name, "owner", e.cfg.Owner, "leader", ok)
	}
	return ok, err
}

// Start campaigns in the background until Stop; a second Start while
// campaigning is a no-op.
func (e *Elector) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := e.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	go func() {
		started()
		defer stopped()
		t := time.NewTicker(e.cfg.TTL / 3)
		defer t.Stop()
		for {
			ok, err := e.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				e.cfg.Logger.Warn("leader election failed", "err", err)
			}
			e.TestSignals.Attempted.Signal(ok)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Stop ends the campaign and resigns; idempotent, and safe without Start.
// It resigns also when the last attempt failed, not only when it won a
// term: an attempt cut off by the stop may have written one (resigning
// without a term deletes nothing), which would otherwise hold the
// leadership for a whole TTL.
func (e *Elector) Stop() {
	e.BaseStartStop.Stop()
	e.leader.Store(false)
	if e.mayLead.Swap(false) {
		ctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		if err := e.store.LeaderResign(ctx, &store.LeaderResignParams{Name: e.cfg.Name, Owner: e.cfg.Owner}); err != nil {
			e.cfg.Logger.Warn("leader resign failed", "err", err)
		}
	}
}
