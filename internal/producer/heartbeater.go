package producer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/internal/testsignal"
	"github.com/idem-dev/idem/store"
)

// HeartbeaterConfig configures a Heartbeater.
type HeartbeaterConfig struct {
	// LeaseDuration is the lease each renewal grants; renewals run every
	// third of it. Required.
	LeaseDuration time.Duration
	// Now is the clock; default time.Now (UTC).
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Heartbeater renews the leases of the running jobs every third of the
// lease in one store call, and cancels the handlers of jobs whose lease was
// lost (cancelled elsewhere, rescued) or ended while renewals failed.
type Heartbeater struct {
	startstop.BaseStartStop
	store   store.Jobs
	running *Running
	cfg     HeartbeaterConfig
	kick    chan struct{} // Kick: renew now

	// TestSignals tell tests about renewals; inert unless initialised.
	TestSignals struct {
		Renewed testsignal.Signal[int] // one run renewed (or tried) this many leases
	}
}

// NewHeartbeater returns a heartbeater for running.
func NewHeartbeater(st store.Jobs, running *Running, cfg *HeartbeaterConfig) *Heartbeater {
	c := *cfg
	if c.Now == nil {
		c.Now = func() time.Time { return time.Now().UTC() }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Heartbeater{store: st, running: running, cfg: c, kick: make(chan struct{}, 1)}
}

// Kick makes the heartbeater renew now rather than at its next tick (when
// announcements of cancels may have been lost: a renewal finds them); it
// never blocks.
func (h *Heartbeater) Kick() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Start renews in the background until Stop.
func (h *Heartbeater) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := h.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	go func() {
		started()
		defer stopped()
		t := time.NewTicker(h.cfg.LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-h.kick:
			}
			h.RunOnce(context.WithoutCancel(ctx))
		}
	}()
	return nil
}

// RunOnce renews every running lease once and returns how many it sent.
func (h *Heartbeater) RunOnce(ctx context.Context) int {
	leases := h.running.Leases()
	defer func() { h.TestSignals.Renewed.Signal(len(leases)) }()
	if len(leases) == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.LeaseDuration/3)
	defer cancel()
	now := h.cfg.Now()
	errs, err := h.store.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{
		Leases: leases, Until: now.Add(h.cfg.LeaseDuration), Now: now})
	if err != nil {
		h.cfg.Logger.Warn("heartbeat failed", "jobs", len(leases), "err", err)
		// A lease that ended with no renewal since is lost as far as this
		// process can tell: the rescuer may run the job elsewhere, so its
		// handler here is cancelled (its finish would be refused anyway).
		for _, l := range h.running.Lapsed(h.cfg.Now()) {
			h.cfg.Logger.Warn("lease ended while heartbeats failed; cancelling handler", "job", l.ID)
			h.running.CancelLease(l, idemtype.ErrLeaseLost)
		}
		return len(leases)
	}
	h.running.Renewed(leases, errs, now.Add(h.cfg.LeaseDuration))
	for i, e := range errs {
		if errors.Is(e, idemtype.ErrLeaseLost) {
			h.cfg.Logger.Debug("lease lost; cancelling handler", "job", leases[i].ID)
			h.running.CancelLease(leases[i], idemtype.ErrLeaseLost)
		}
	}
	return len(leases)
}
