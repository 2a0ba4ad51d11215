package idem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/leadership"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/store"
)

// errShutdown is the cause of a handler context cancelled by Stop.
var errShutdown = errors.New("client shutting down")

// runtime is the working half of a started Client: one producer per queue,
// the executors of claimed jobs, a heartbeater, a batching completer and the
// leader-only maintenance services.
//
// Shutdown order (Stop): 1. producers stop claiming; 2. running jobs get
// until the Stop context ends to finish; 3. the rest have their handler
// context cancelled and their leases released so another process can take
// them at once; 4. the heartbeater stops (after the releases, so no lease
// expires meanwhile); 5. the completer drains; 6. maintenance stops and the
// leader resigns.
type runtime struct {
	c *Client

	handlerCtx    context.Context
	cancelHandler context.CancelCauseFunc
	claimCtx      context.Context
	stopClaiming  context.CancelFunc

	mu        sync.Mutex
	running   map[int64]*runningJob
	producers sync.WaitGroup // producers: they start executors, so Stop waits for them first
	jobs      sync.WaitGroup // executors
	loops     sync.WaitGroup // heartbeater, listener

	completer *completer
	elector   *leadership.Elector
	services  []interface{ Stop() }
	hbStop    chan struct{}
}

// runningJob is a job this process is executing.
type runningJob struct {
	row    *JobRow
	key    *store.RecordAcquireResult // the batched key acquire; nil = acquire alone
	cancel context.CancelCauseFunc
	lost   bool // lease lost or released: drop the finish (guarded by runtime.mu)
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
	c.started = true
	rt := &runtime{c: c, running: map[int64]*runningJob{}, hbStop: make(chan struct{})}
	base := context.WithoutCancel(ctx)
	rt.handlerCtx, rt.cancelHandler = context.WithCancelCause(base)
	rt.claimCtx, rt.stopClaiming = context.WithCancel(base)
	rt.completer = newCompleter(c.store, c.logger)
	c.runtime = rt
	c.producers = map[string]*producer{}
	for name, q := range c.cfg.Queues {
		p := &producer{rt: rt, queue: name, max: q.MaxWorkers, wakeCh: make(chan struct{}, 1)}
		c.producers[name] = p
		rt.producers.Add(1)
		go func() { defer rt.producers.Done(); p.run(rt.claimCtx) }()
	}
	rt.loops.Add(1)
	go func() { defer rt.loops.Done(); rt.heartbeat() }()
	if l, ok := c.store.(listener); ok && len(c.producers) > 0 {
		rt.loops.Add(1)
		go func() { defer rt.loops.Done(); rt.listen(rt.claimCtx, l) }()
	}
	if !c.cfg.DisableMaintenance {
		rt.startMaintenance(base)
	}
	return nil
}

// startMaintenance starts the elector and the leader-only services.
func (rt *runtime) startMaintenance(ctx context.Context) {
	cfg := rt.c.cfg
	rt.elector = leadership.New(rt.c.store, leadership.Config{
		Owner: cfg.WorkerID, TTL: cfg.LeaderTTL, Now: cfg.Now, Logger: cfg.Logger})
	rt.elector.Start(ctx)
	mc := &maintenance.Config{Logger: cfg.Logger, Now: cfg.Now, IsLeader: rt.elector.IsLeader,
		CompletedRetention: cfg.CompletedRetention, CancelledRetention: cfg.CancelledRetention,
		DeadRetention: cfg.DeadRetention, OnPromote: rt.wakeQueues}
	rescue := *mc
	rescue.Interval = cfg.RescueInterval
	retention := *mc
	retention.Interval = cfg.MaintenanceInterval
	r, p, t := maintenance.NewRescuer(rt.c.store, &rescue), maintenance.NewPromoter(rt.c.store, mc),
		maintenance.NewRetention(rt.c.store, &retention)
	r.Start(ctx)
	p.Start(ctx)
	t.Start(ctx)
	rt.services = []interface{ Stop() }{r, p, t}
}

// listener is implemented by stores that announce new jobs from other
// processes (pgstore: LISTEN/NOTIFY). Polling stays the fallback.
type listener interface {
	Listen(ctx context.Context) (<-chan string, error)
}

// listen wakes the producer of every queue the store announces.
func (rt *runtime) listen(ctx context.Context, l listener) {
	ch, err := l.Listen(ctx)
	if err != nil {
		rt.c.logger.Warn("listen for new jobs failed; polling only", "err", err)
		return
	}
	for queue := range ch {
		rt.wakeQueues([]string{queue})
	}
}

// wakeQueues wakes the named producers, or all of them for nil.
func (rt *runtime) wakeQueues(queues []string) {
	rt.c.mu.Lock()
	defer rt.c.mu.Unlock()
	for name, p := range rt.c.producers {
		if queues == nil || contains(queues, name) {
			p.wake()
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Stop shuts the client down gracefully: no new claims, running jobs get
// until ctx ends to finish, then their handlers are cancelled and their
// leases released so another process can take them at once. Stop is
// idempotent; a client cannot be started again.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	rt := c.runtime
	if rt == nil || c.stopped {
		c.stopped = true
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()

	rt.stopClaiming()
	rt.producers.Wait() // no executor starts after this
	done := make(chan struct{})
	go func() { rt.jobs.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = rt.releaseRunning()
		rt.cancelHandler(errShutdown)
	}
	close(rt.hbStop)
	rt.loops.Wait()
	rt.completer.stop()
	for _, s := range rt.services {
		s.Stop()
	}
	if rt.elector != nil {
		rt.elector.Stop()
	}
	return err
}

// releaseRunning gives the leases of every running job back to the store.
func (rt *runtime) releaseRunning() error {
	rt.mu.Lock()
	var leases []store.Lease
	for id, j := range rt.running {
		if !j.lost {
			j.lost = true
			leases = append(leases, store.Lease{ID: id, Token: j.row.LeaseToken})
		}
	}
	rt.mu.Unlock()
	if len(leases) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := rt.c.store.JobReleaseMany(ctx, &store.JobReleaseManyParams{Leases: leases, Now: rt.c.now()})
	rt.c.logger.Info("released leases at shutdown", "jobs", n)
	if err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// cancelRunning cancels the handler of a locally running job.
func (rt *runtime) cancelRunning(id int64, cause error) {
	rt.mu.Lock()
	j := rt.running[id]
	if j != nil {
		j.lost = true
	}
	rt.mu.Unlock()
	if j != nil {
		j.cancel(cause)
	}
}

// heartbeat renews the leases of running jobs every third of the lease and
// cancels the handlers of jobs whose lease was lost.
func (rt *runtime) heartbeat() {
	interval := rt.c.cfg.LeaseDuration / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-rt.hbStop:
			return
		case <-t.C:
		}
		rt.heartbeatOnce()
	}
}

func (rt *runtime) heartbeatOnce() {
	rt.mu.Lock()
	var leases []store.Lease
	for id, j := range rt.running {
		if !j.lost {
			leases = append(leases, store.Lease{ID: id, Token: j.row.LeaseToken})
		}
	}
	rt.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rt.c.cfg.LeaseDuration/3)
	defer cancel()
	now := rt.c.now()
	errs, err := rt.c.store.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{
		Leases: leases, Until: now.Add(rt.c.cfg.LeaseDuration), Now: now})
	if err != nil {
		rt.c.logger.Warn("heartbeat failed", "jobs", len(leases), "err", err)
		return
	}
	for i, e := range errs {
		if errors.Is(e, ErrLeaseLost) {
			rt.c.logger.Debug("lease lost; cancelling handler", "job", leases[i].ID)
			rt.cancelRunning(leases[i].ID, ErrLeaseLost)
		}
	}
}

// producer claims the jobs of one queue while it has free workers.
type producer struct {
	rt     *runtime
	queue  string
	max    int
	wakeCh chan struct{}

	mu     sync.Mutex
	active int
}

func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// run claims until ctx ends: after a wake-up, a freed worker, or every
// PollInterval; again at once while claims come back full.
func (p *producer) run(ctx context.Context) {
	cfg := p.rt.c.cfg
	t := time.NewTicker(cfg.PollInterval)
	defer t.Stop()
	kinds := cfg.Workers.Kinds()
	// While there is a backlog (the last claim came back full), wait until a
	// quarter of the workers are free so that claims stay batched.
	threshold := max(1, min(p.max/4, cfg.FetchLimit))
	backlog := false
	for ctx.Err() == nil {
		p.mu.Lock()
		free := p.max - p.active
		p.mu.Unlock()
		if free > 0 && (free >= threshold || !backlog) {
			limit := min(free, cfg.FetchLimit)
			n, err := p.claim(ctx, kinds, limit)
			if err != nil && ctx.Err() == nil {
				p.rt.c.logger.Warn("claim failed", "queue", p.queue, "err", err)
			}
			backlog = err == nil && n == limit
			if backlog && free-n >= threshold {
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-p.wakeCh:
		case <-t.C:
		}
	}
}

// claim takes up to limit jobs and starts an executor for each.
func (p *producer) claim(ctx context.Context, kinds []string, limit int) (int, error) {
	now := p.rt.c.now()
	jobs, err := p.rt.c.store.JobClaim(ctx, &store.JobClaimParams{
		Queues: []string{p.queue}, Kinds: kinds, WorkerID: p.rt.c.cfg.WorkerID,
		Limit: limit, LeaseUntil: now.Add(p.rt.c.cfg.LeaseDuration), Now: now})
	if err != nil {
		return 0, fmt.Errorf("claim jobs: %w", err)
	}
	p.mu.Lock()
	p.active += len(jobs)
	p.mu.Unlock()
	keys := p.rt.acquireKeys(ctx, jobs)
	for _, row := range jobs {
		jctx, cancel := context.WithCancelCause(p.rt.handlerCtx)
		j := &runningJob{row: row, cancel: cancel, key: keys[row.ID]}
		p.rt.mu.Lock()
		p.rt.running[row.ID] = j
		p.rt.mu.Unlock()
		p.rt.jobs.Add(1)
		go func() {
			defer p.rt.jobs.Done()
			defer p.done(row.ID, cancel)
			p.rt.execute(jctx, j)
		}()
	}
	return len(jobs), nil
}

// done frees the worker slot of a finished job.
func (p *producer) done(id int64, cancel context.CancelCauseFunc) {
	cancel(nil)
	p.rt.mu.Lock()
	delete(p.rt.running, id)
	p.rt.mu.Unlock()
	p.mu.Lock()
	p.active--
	p.mu.Unlock()
	p.wake()
}

// jitter returns a uniform random number in [0,1).
func jitter() float64 { return rand.Float64() }
