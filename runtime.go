package idem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/completer"
	"github.com/idem-dev/idem/internal/deliver"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/internal/leadership"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/store"
)

// errShutdown is the cause of a handler context cancelled by Stop.
var errShutdown = errors.New("client shutting down")

// shutdownGrace is how long Stop, once its context has ended, still waits
// for cancelled handlers to return (at most a third of the lease, so that
// their leases, no longer renewed, cannot expire meanwhile), and how long
// the completer then gets to write the finishes handed over before the
// deadline.
const shutdownGrace = 5 * time.Second

// runtime is the working half of a started Client, assembled from the
// engine's packages: one producer per queue (internal/producer) running its
// jobs through the executor (internal/executor), the heartbeater of the
// running jobs, the batching completer (internal/completer), the notifier's
// LISTEN relay (internal/notifier) and the leader-only maintenance services
// (internal/maintenance, internal/leadership).
//
// Shutdown order (Stop): 1. producers stop claiming (a claim in flight
// completes and gives its jobs back; past the Stop context and
// shutdownGrace it is cut off); 2. running jobs get until the Stop
// context ends to finish; 3. the rest are marked lost (their outcomes
// dropped) and their handler contexts cancelled, Stop waits up to
// shutdownGrace for them to return, and only then are their leases released
// so another process can take them at once (released first, a job could
// start elsewhere while its handler still ran here); 4. the completer
// drains, until the Stop context ends (or for shutdownGrace when step 2
// used it all up), what is left being logged and left to the rescuer;
// 5. the heartbeater stops (after the drain: the leases of the finishes
// being written are renewed until they are, as while the client runs);
// 6. maintenance stops and the leader resigns.
type runtime struct {
	running     *producer.Running
	producers   []*producer.Producer
	heartbeater *producer.Heartbeater
	completer   *completer.Completer
	elector     *leadership.Elector
	services    []startstop.Service
	// unwatch stops the wake-ups of the producers at a new worker's
	// registration (Workers.onNewKind).
	unwatch []func()
}

// newExecutor builds the executor of c: the one place that turns an attempt
// into a finish, for Go workers, pull workers and JobCompleteTx alike.
func newExecutor(c *Client) (*executor.Executor, error) {
	cfg, stats, targets := c.cfg, &c.stats, c.targets
	return executor.New(&executor.Config{
		Store: c.store, Logger: cfg.Logger, Now: func() time.Time { return cfg.Now().UTC() },
		LeaseDuration: cfg.LeaseDuration, CompressThreshold: cfg.CompressThreshold,
		ResultTTL:  cfg.resultTTL,
		RetryDelay: func(row *JobRow) time.Duration { return cfg.retryPolicy(row).Delay(row.Attempt, jitter()) },
		Handler: func(kind string) executor.Handler {
			if h := cfg.Workers.handler(kind); h != nil {
				return executor.Handler(h)
			}
			return nil
		},
		Target: func(ctx context.Context, row *JobRow) (deliver.Target, string, error) {
			if !cfg.Queues[row.Queue].Deliver {
				return nil, "", nil
			}
			return targets.lookup(ctx, row)
		},
		Timeout: cfg.timeout,
		// Hits are counted once their cached finish is written
		// (observeWritten), not when the key step finds the result.
		CacheMisses: &stats.cacheMisses,
		OnCacheMiss: func(row *JobRow) { c.observe(EventCacheMiss, row, nil) },
	})
}

// Start begins working the configured queues and, unless disabled, the
// leader-elected maintenance services. It returns at once. ctx only carries
// values: cancelling it does not stop the client; Stop does, gracefully.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errors.New("start: client already started")
	}
	if c.stopped {
		// Started after its Stop, the runtime would run with nothing left
		// to stop it: a later Stop finds the client stopped already.
		return errors.New("start: client stopped")
	}
	if err := c.applyLimits(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := c.putConfigSchedules(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	c.started = true
	base := context.WithoutCancel(ctx)
	rt := &runtime{running: producer.NewRunning()}
	rt.completer = completer.New(c.store, &completer.Config{Logger: c.logger, Finished: c.notifier.Finished})
	_ = rt.completer.Start(base)
	for name, q := range c.cfg.Queues {
		// Workers is set whenever there are queues.
		kinds := queueKinds(c.cfg.Workers, q)
		if kinds != nil && len(c.cfg.Workers.Kinds()) == 0 {
			c.logger.Info("no worker registered yet: the queue claims nothing until one is", "queue", name)
		}
		p, err := producer.New(c.store, c.exec, rt.running, rt.completer.SubmitThen, &producer.Config{
			Queue: name, MaxWorkers: q.MaxWorkers, FetchLimit: c.cfg.FetchLimit,
			PollInterval: c.cfg.PollInterval, LeaseDuration: c.cfg.LeaseDuration,
			WorkerID: c.cfg.WorkerID, Kinds: kinds, Now: c.now, Logger: c.logger,
			OnClaim: c.observeClaim, OnFinish: c.observeWritten})
		if err != nil {
			rt.completer.Stop()
			for name := range c.cfg.Queues {
				c.notifier.Unsubscribe(name)
			}
			for _, unwatch := range rt.unwatch {
				unwatch()
			}
			return fmt.Errorf("start: %w", err)
		}
		c.notifier.Subscribe(name, p.Wake)
		if kinds != nil {
			// A worker registered later wakes the queue, as an insert
			// does: its jobs may be waiting already. Watched before the
			// producer starts, so that no registration is missed.
			rt.unwatch = append(rt.unwatch, c.cfg.Workers.onNewKind(p.Wake))
		}
		rt.producers = append(rt.producers, p)
	}
	for _, p := range rt.producers {
		_ = p.Start(base)
	}
	rt.heartbeater = producer.NewHeartbeater(c.store, rt.running, &producer.HeartbeaterConfig{
		LeaseDuration: c.cfg.LeaseDuration, Now: c.now, Logger: c.logger})
	_ = rt.heartbeater.Start(base)
	// A running job cancelled by another process (announced by a Listener
	// store) is cancelled here at once, as JobCancel does in this process:
	// also a claim of this process not yet registered. When announcements
	// may have been lost (a reconnect), a renewal right away finds the
	// cancels instead. Only the producers run handlers here (a client
	// without queues listens to nothing).
	if len(rt.producers) > 0 {
		c.notifier.SubscribeCancels(func(l store.Lease) {
			rt.running.CancelVoided(l, c.now(), c.cfg.LeaseDuration, ErrJobCancelled)
		}, rt.heartbeater.Kick)
	}
	_ = c.notifier.Start(base)
	if !c.cfg.DisableMaintenance {
		rt.startMaintenance(base, c)
	}
	c.runtime = rt
	return nil
}

// startMaintenance starts the elector and the leader-only services.
func (rt *runtime) startMaintenance(ctx context.Context, c *Client) {
	cfg := c.cfg
	rt.elector = leadership.New(c.store, leadership.Config{
		Owner: cfg.WorkerID, TTL: cfg.LeaderTTL, Now: cfg.Now, Logger: cfg.Logger})
	_ = rt.elector.Start(ctx)
	mc := &maintenance.Config{Logger: cfg.Logger, Now: cfg.Now, IsLeader: rt.elector.IsLeader,
		CompletedRetention: cfg.CompletedRetention, CancelledRetention: cfg.CancelledRetention,
		DeadRetention: cfg.DeadRetention, EventRetention: max(cfg.EventRetention, 0), OnPromote: c.notifier.WakeQueues,
		OnRun: c.maintenanceHook()}
	rescue := *mc
	rescue.Interval = cfg.RescueInterval
	rescue.OnRescue = c.observeRescue
	retention := *mc
	retention.Interval = cfg.MaintenanceInterval
	r, p, t := maintenance.NewRescuer(c.store, &rescue), maintenance.NewPromoter(c.store, mc),
		maintenance.NewRetention(c.store, &retention)
	sched := *mc
	sched.Interval, sched.ScheduleGrace = cfg.ScheduleInterval, cfg.ScheduleGrace
	rt.services = []startstop.Service{r, p, t, c.newScheduler(&sched)}
	for _, s := range rt.services {
		_ = s.Start(ctx)
	}
}

// putConfigSchedules stores Config.Schedules (validated by NewClient).
func (c *Client) putConfigSchedules(ctx context.Context) error {
	for i := range c.cfg.Schedules {
		if _, err := c.SchedulePut(ctx, &c.cfg.Schedules[i]); err != nil {
			return fmt.Errorf("schedule %q: %w", c.cfg.Schedules[i].Name, err)
		}
	}
	return nil
}

// Stop shuts the client down gracefully: no new claims, running jobs get
// until ctx ends to finish, then their handlers are cancelled (their
// outcomes dropped) and, once they returned or after a few seconds, their
// leases released so another process can take them at once. Finishes not
// written by then (the store down) are left to the rescuer. Stop is
// idempotent: a call while another Stop runs waits for it to return (or
// for its own ctx, then returning ctx's error wrapped). A client cannot be
// started again, nor started once Stop was called.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		done := c.stopDone
		c.mu.Unlock()
		return waitStopped(ctx, done)
	}
	c.stopped = true
	rt := c.runtime
	if rt == nil {
		c.mu.Unlock()
		return nil
	}
	stopped := make(chan struct{})
	c.stopDone = stopped
	c.mu.Unlock()
	defer close(stopped)

	c.stopProducers(ctx, rt) // no executor starts after this
	for _, unwatch := range rt.unwatch {
		unwatch()
	}
	// The notifier listens until the handlers have returned and their
	// finishes are written: a cancel announced by another process while
	// they wind down still cancels its handler at once.
	done := make(chan struct{})
	go func() { rt.running.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		// Lost first (outcomes dropped), cancelled, waited for, then
		// released: never released while a handler that heeds its context
		// still runs. One that ignores it past the grace is released
		// anyway; its late finish is dropped here, and refused by the store
		// had it another claim's token.
		leases := rt.running.Release()
		rt.running.CancelAll(errShutdown)
		grace := time.NewTimer(min(shutdownGrace, c.cfg.LeaseDuration/3))
		select {
		case <-done:
		case <-grace.C:
			c.logger.Warn("handlers still running after their cancellation at shutdown; releasing their jobs")
		}
		grace.Stop()
		err = c.releaseLeases(leases)
	}
	drain := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		drain, cancel = context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
	}
	// The heartbeater renews the leases of the finishes being drained
	// (the released jobs are lost: no longer renewed); stopped before,
	// a drain longer than a lease let the rescuer take a finished job.
	rt.completer.Drain(drain)
	c.notifier.Stop()
	for name := range c.cfg.Queues {
		c.notifier.Unsubscribe(name) // the producers stopped
	}
	rt.heartbeater.Stop()
	c.targets.close() // no delivery runs any more: drop connections
	for _, s := range rt.services {
		s.Stop()
	}
	if rt.elector != nil {
		rt.elector.Stop()
	}
	return err
}

// waitStopped waits for the Stop under way to return (done closed; nil
// done: none stopped a runtime), or for ctx.
func waitStopped(ctx context.Context, done <-chan struct{}) error {
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop: waiting for the stop under way: %w", ctx.Err())
	}
}

// stopProducers stops the producers. A claim in flight is let finish (its
// jobs are given back) until ctx ends and for shutdownGrace (at most a third
// of the lease) after; then it is cut off (producer.AbortClaim), so that a
// store that does not answer holds Stop no longer than that.
func (c *Client) stopProducers(ctx context.Context, rt *runtime) {
	stopped := make(chan struct{})
	go func() { stopAll(rt.producers); close(stopped) }()
	select {
	case <-stopped:
		return
	case <-ctx.Done():
	}
	grace := time.NewTimer(min(shutdownGrace, c.cfg.LeaseDuration/3))
	defer grace.Stop()
	select {
	case <-stopped:
		return
	case <-grace.C:
	}
	c.logger.Warn("claims still in flight at the end of shutdown; cutting them off")
	for _, p := range rt.producers {
		p.AbortClaim()
	}
	<-stopped
}

// stopAll stops services at once (a slow one does not delay the others'
// cancellation) and waits for them all.
func stopAll[S startstop.Service](services []S) {
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Add(1)
		go func() { defer wg.Done(); s.Stop() }()
	}
	wg.Wait()
}

// releaseLeases gives the leases of running jobs back to the store.
func (c *Client) releaseLeases(leases []store.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.store.JobReleaseMany(ctx, &store.JobReleaseManyParams{Leases: leases, Now: c.now()})
	c.logger.Info("released leases at shutdown", "jobs", n)
	if err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// jitter returns a uniform random number in [0,1).
func jitter() float64 { return rand.Float64() }

// queueKinds returns what tells a queue's producer the kinds it claims,
// asked at each claim: those with a Go worker in workers (registered
// before or after Start), or every kind (nil) when the queue delivers to
// targets.
func queueKinds(workers *Workers, q QueueConfig) func() []string {
	if q.Deliver {
		return nil
	}
	return workers.claimKinds
}
