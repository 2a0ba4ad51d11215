// Package producer holds the claim loop of a queue and what it needs around
// the executors it starts: the registry of running jobs (Running) and the
// heartbeater that renews their leases (Heartbeater).
//
// A Producer claims up to min(free workers, FetchLimit) jobs of its queue
// in one store call when woken (a local insert, a freed worker, a
// LISTEN/NOTIFY announcement relayed by the notifier) or every PollInterval;
// while there is a backlog (the last claim came back full) it waits until a
// quarter of the workers are free, so claims stay batched. Each claimed job
// runs in its own goroutine through the executor, and its finish goes to the
// completer unless the lease was lost meanwhile.
package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/internal/testsignal"
	"github.com/idem-dev/idem/store"
)

// Config configures a Producer. Every field but Logger is required.
type Config struct {
	Queue         string        // the queue it claims from
	MaxWorkers    int           // jobs of the queue run at once by this process
	FetchLimit    int           // most jobs in one claim
	PollInterval  time.Duration // claim at least this often
	LeaseDuration time.Duration // lease of a claim
	WorkerID      string        // names this process in attempts
	// Kinds returns the kinds it has handlers for, asked at each claim so
	// that a handler registered while the producer runs is claimed for
	// from the next claim; it must be safe for concurrent use, and its
	// result is not changed. nil = any kind (a queue that delivers to
	// targets). An empty list = none: the producer claims nothing (every
	// job it took would fail for want of a handler).
	Kinds  func() []string
	Now    func() time.Time
	Logger *slog.Logger
	// OnClaim is told of each claimed job and the claim time; OnFinish of
	// each finish once the completer wrote it (not of one it could not
	// write: the lease lost meanwhile, the store failing, the client
	// stopping), so that only what committed is counted. nil = not told.
	// They run on the producer's, executors' and completer's goroutines
	// and must not block.
	OnClaim  func(row *idemtype.JobRow, now time.Time)
	OnFinish func(row *idemtype.JobRow, fin *store.JobFinishParams)
}

// Store is what a Producer needs of the store: the job calls, and giving
// back a claim that returned while it was stopping.
type Store interface {
	store.Jobs
	JobReleaseMany(ctx context.Context, p *store.JobReleaseManyParams) (int, error)
}

// Producer claims the jobs of one queue while it has free workers.
type Producer struct {
	startstop.BaseStartStop
	cfg      Config
	store    Store
	exec     *executor.Executor
	running  *Running
	complete func(fin *store.JobFinishParams, written, then func())
	wakeCh   chan struct{}

	mu     sync.Mutex
	active int

	// giving counts the give-backs of failed claims under way (run waits
	// for them before it returns).
	giving sync.WaitGroup

	// abort cancels the claim in flight (AbortClaim): Stop does not.
	abort    context.Context
	abortNow context.CancelFunc

	// kept, when set by a test (before Start), is called with each job
	// whose outcome was kept, just before the finish goes to the completer.
	kept func(row *idemtype.JobRow)

	// TestSignals tell tests about claims; inert unless initialised.
	TestSignals struct {
		Claimed   testsignal.Signal[int]               // a claim returned this many jobs
		Throttled testsignal.Signal[store.ClaimReport] // a limit held work back
	}
}

// New returns a producer that runs its jobs with exec, registers them in
// running and hands their finishes to complete (the completer's
// SubmitThen), which calls written once the finish is written and then
// once it is written, failed or dropped.
// A job stays in running, its lease renewed by the heartbeater, from its
// claim until then: while it waits for its key leases, while its handler
// runs, and while its finish waits to be written. It returns an error
// naming an invalid field of cfg.
func New(st Store, exec *executor.Executor, running *Running, complete func(fin *store.JobFinishParams, written, then func()), cfg *Config) (*Producer, error) {
	if st == nil || exec == nil || running == nil || complete == nil || cfg == nil {
		return nil, errors.New("new producer: store, executor, running, complete and cfg are required")
	}
	if cfg.Queue == "" || cfg.MaxWorkers < 1 || cfg.FetchLimit < 1 || cfg.PollInterval <= 0 ||
		cfg.LeaseDuration <= 0 || cfg.Now == nil {
		return nil, fmt.Errorf("new producer %q: Queue, Now and positive MaxWorkers, FetchLimit, PollInterval and LeaseDuration are required", cfg.Queue)
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	abort, abortNow := context.WithCancel(context.Background())
	return &Producer{cfg: c, store: st, exec: exec, running: running, complete: complete,
		wakeCh: make(chan struct{}, 1), abort: abort, abortNow: abortNow}, nil
}

// AbortClaim cancels the claim in flight and any later one. Stop lets a
// claim in flight finish (bounded by one lease) so that its jobs are given
// back rather than stranded; a shutdown whose deadline has passed calls
// AbortClaim so that a store that does not answer cannot hold Stop for
// that long (the jobs of a claim cut off mid-commit wait for the rescuer).
func (p *Producer) AbortClaim() { p.abortNow() }

// Wake makes the producer look for jobs now; it never blocks.
func (p *Producer) Wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// Start claims in the background until Stop. Handlers run in contexts that
// Stop does not cancel (cancel them through Running); values of ctx reach
// them. Stop lets a claim in flight finish and gives back the jobs it took,
// so no handler starts once Stop was called (if that release fails they run
// instead, rather than wait for the rescuer).
func (p *Producer) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := p.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	go func() {
		started()
		defer stopped()
		p.run(ctx)
	}()
	return nil
}

// run claims until ctx ends: after a wake-up, a freed worker, the refill
// of a rate limit that throttled it, or every PollInterval; again at once
// while claims come back full.
func (p *Producer) run(ctx context.Context) {
	defer p.giving.Wait()
	t := time.NewTicker(p.cfg.PollInterval)
	defer t.Stop()
	handlerCtx := context.WithoutCancel(ctx)
	// While there is a backlog (the last claim came back full), wait until a
	// quarter of the workers are free so that claims stay batched.
	threshold := max(1, min(p.cfg.MaxWorkers/4, p.cfg.FetchLimit))
	backlog := false
	// refill fires when the rate window that throttled the last claim
	// ends (nil channel: no throttle pending), so throttled work starts as
	// soon as its budget allows without polling faster.
	refill := time.NewTimer(time.Hour)
	refill.Stop()
	defer refill.Stop()
	for ctx.Err() == nil {
		p.mu.Lock()
		free := p.cfg.MaxWorkers - p.active
		p.mu.Unlock()
		if free > 0 && (free >= threshold || !backlog) {
			limit := min(free, p.cfg.FetchLimit)
			n, next, err := p.claim(ctx, handlerCtx, limit)
			if err != nil && ctx.Err() == nil {
				p.cfg.Logger.Warn("claim failed", "queue", p.cfg.Queue, "err", err)
			}
			if !next.IsZero() {
				refill.Reset(max(0, next.Sub(p.cfg.Now())))
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
		case <-refill.C:
		}
	}
}

// claim takes up to limit jobs and starts an executor for each. next is
// when a rate limit that held work back refills (zero: none did).
func (p *Producer) claim(ctx, handlerCtx context.Context, limit int) (n int, next time.Time, err error) {
	var kinds []string // nil: any kind
	if p.cfg.Kinds != nil {
		if kinds = p.cfg.Kinds(); len(kinds) == 0 {
			// No handler for any kind (none registered yet): a claim would
			// take jobs only to fail them. Not left to the store: an empty
			// kind list is none on PostgreSQL but was any kind on SQLite.
			p.TestSignals.Claimed.Signal(0)
			return 0, time.Time{}, nil
		}
	}
	now := p.cfg.Now()
	// Stop does not cut the claim off: on PostgreSQL a commit that succeeds
	// while the call's context is cancelled reports an error, leaving the
	// claimed jobs running in the store with nobody executing them until
	// the rescuer takes them back (an attempt used). The claim and its key
	// leases are bounded by one lease instead.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseDuration)
	defer cancel()
	defer context.AfterFunc(p.abort, cancel)() // AbortClaim cuts it off after all
	var report store.ClaimReport
	token := store.NewToken()
	jobs, err := p.store.JobClaim(cctx, &store.JobClaimParams{
		Queues: []string{p.cfg.Queue}, Kinds: kinds, WorkerID: p.cfg.WorkerID,
		Limit: limit, LeaseUntil: now.Add(p.cfg.LeaseDuration), Now: now, Report: &report, LeaseToken: token})
	if err != nil {
		// The claim may have committed with its answer lost (a connection
		// cut after the commit): its jobs would stay running, owned by
		// nobody, until the rescuer took them back a lease later with an
		// attempt used (a job allowed one attempt would die unrun). Give
		// back whatever runs under the claim's token, in the background
		// (the loop goes on claiming), retrying while the store does not
		// answer, for at most a lease, until Stop.
		p.giving.Add(1)
		go func() {
			defer p.giving.Done()
			p.giveBack(ctx, token)
		}()
		return 0, time.Time{}, fmt.Errorf("claim jobs: %w", err)
	}
	if ctx.Err() != nil && len(jobs) > 0 && p.release(cctx, jobs) {
		return 0, time.Time{}, nil // stopping: no handler starts
	}
	if report.Throttled {
		p.cfg.Logger.Debug("claim throttled", "queue", p.cfg.Queue, "claimed", len(jobs), "next_refill", report.NextRefill)
		p.TestSignals.Throttled.Signal(report)
	}
	p.mu.Lock()
	p.active += len(jobs)
	p.mu.Unlock()
	// Registered (heartbeated) before the key leases are taken: acquiring
	// them may take longer than the lease.
	ctxs := make([]context.Context, len(jobs))
	cancels := make([]context.CancelCauseFunc, len(jobs))
	registered := make([]*runningJob, len(jobs))
	for i, row := range jobs {
		ctxs[i], cancels[i] = context.WithCancelCause(handlerCtx)
		registered[i] = p.running.add(row, cancels[i])
	}
	keys := p.exec.AcquireKeys(cctx, jobs)
	stale := p.renewShort(cctx, jobs)
	for i, row := range jobs {
		// A claim whose lease renewShort found over is not reported: its
		// handler does not start and the job, given back, is reported at
		// the claim that runs it (as a pull claim given back).
		if p.cfg.OnClaim != nil && !stale[row.ID] {
			p.cfg.OnClaim(row, now)
		}
		jctx, cancel, j := ctxs[i], cancels[i], registered[i]
		key := keys[row.ID]
		go func() {
			defer p.running.done()
			fin, inTx := p.exec.Attempt(jctx, row, key)
			// The lease is renewed until the finish is written (a completer
			// slower than the lease must not let the rescuer run the job
			// again), and a kept finish is no longer released by Stop. The
			// finish of a lost lease is dropped, unless it is the completion
			// the handler wrote in its own transaction (JobCompleteTx),
			// whose commit is what ended the lease: the store accepts it as
			// a repeat (so it is reported once) or refuses it as lease-lost.
			if !p.running.keep(j) && !inTx {
				p.ackCancel(ctx, row, fin, context.Cause(jctx))
				p.done(j, cancel)
				p.running.remove(j)
				return
			}
			if p.kept != nil {
				p.kept(row)
			}
			var written func()
			if p.cfg.OnFinish != nil {
				written = func() { p.cfg.OnFinish(row, fin) }
			}
			p.complete(fin, written, func() { p.running.remove(j) })
			p.done(j, cancel)
		}()
	}
	p.TestSignals.Claimed.Signal(len(jobs))
	return len(jobs), report.NextRefill, nil
}

// renewShort renews, before their handlers start, the leases of the jobs
// that have less than two thirds of a lease left (the claim's answer or
// its key step was slow): the heartbeater renews every third of a lease on
// its own schedule, and might come only after such a lease ended, when the
// rescuer may give the job to another process while its handler runs here.
// It checks so too the jobs whose key the claim's key step took (not held
// by the claim itself): one cancelled before that step (in a process whose
// cancel is not announced here) would otherwise start its handler, and
// keep the key lease taken after the cancel until it ended.
// A lease the store no longer renews (it ended, or the job was cancelled)
// is cancelled here (cause ErrJobCancelled for a cancelled job, so that
// the executor gives its key back; else ErrLeaseLost), so its handler does
// not start, and given back when it still runs under the claim's token
// (ended, not yet rescued): available at once, its attempt not counted.
// When the renewal fails, the leases that have ended are cancelled the
// same way (the heartbeater's rule); the others start and the heartbeater
// goes on trying. A lease's end is the latest known here (the heartbeater
// renews the jobs from their registration, also during a slow key step),
// and the renewal has a context of its own: the claim's may be over by
// now. It returns the ids of the jobs whose leases it cancelled.
func (p *Producer) renewShort(ctx context.Context, jobs []*idemtype.JobRow) (stale map[int64]bool) {
	now := p.cfg.Now()
	var leases []store.Lease
	var ends []time.Time
	for _, j := range jobs {
		l := store.Lease{ID: j.ID, Token: j.LeaseToken}
		end := p.running.leaseEnd(l)
		// A key taken by the claim's key step (not held by the claim
		// itself) may have been taken after a cancel: checked too.
		keyStep := j.IdempotencyKey != "" && !j.KeyHeld
		if !end.IsZero() && (keyStep || end.Sub(now) < 2*p.cfg.LeaseDuration/3) {
			leases = append(leases, l)
			ends = append(ends, end)
		}
	}
	if len(leases) == 0 {
		return nil
	}
	stale = map[int64]bool{}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseDuration/3)
	defer cancel()
	defer context.AfterFunc(p.abort, cancel)() // AbortClaim cuts it off too
	until := now.Add(p.cfg.LeaseDuration)
	errs, err := p.store.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{Leases: leases, Until: until, Now: now})
	if err != nil {
		p.cfg.Logger.Warn("renewing the short leases of a slow claim failed", "queue", p.cfg.Queue, "jobs", len(leases), "err", err)
		for i, l := range leases {
			if !ends[i].After(p.cfg.Now()) {
				p.running.CancelLease(l, idemtype.ErrLeaseLost)
				stale[l.ID] = true
			}
		}
		return stale
	}
	p.running.Renewed(leases, errs, until)
	var lost []store.Lease
	for i, e := range errs {
		if errors.Is(e, idemtype.ErrLeaseLost) {
			p.running.CancelLease(leases[i], p.lostCause(ctx, leases[i].ID))
			lost = append(lost, leases[i])
			stale[leases[i].ID] = true
		}
	}
	if len(lost) == 0 {
		return stale
	}
	n, err := p.store.JobReleaseMany(ctx, &store.JobReleaseManyParams{Leases: lost, Now: p.cfg.Now()})
	if err != nil {
		p.cfg.Logger.Warn("could not give back the jobs of a slow claim whose lease ended; they wait for the rescuer",
			"queue", p.cfg.Queue, "jobs", len(lost), "err", err)
		return stale
	}
	if n > 0 {
		p.cfg.Logger.Warn("gave back the jobs of a claim that came back after their lease ended", "queue", p.cfg.Queue, "jobs", n)
		p.Wake()
	}
	return stale
}

// ackCancel acknowledges the cancel of a job whose handler, cancelled
// while it ran (cause ErrJobCancelled; or ErrLeaseLost from a refused
// renewal when the job reads cancelled: a cancel in another process on
// SQLite), has now returned: its cancelled job holds its concurrency slot,
// its FIFO partition and its dependants that wait for any outcome until
// then (store.Jobs.JobCancel), so that nothing runs beside this handler
// that should not. The finish is written as any other; the store refuses
// it (ErrLeaseLost: the outcome is dropped) and ends the hold. Written by
// the completer, which wakes the producer once done. A lease lost
// otherwise (ended, given back) is left as it is.
func (p *Producer) ackCancel(ctx context.Context, row *idemtype.JobRow, fin *store.JobFinishParams, cause error) {
	if fin == nil {
		return
	}
	if !errors.Is(cause, idemtype.ErrJobCancelled) {
		if !errors.Is(cause, idemtype.ErrLeaseLost) {
			return
		}
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseDuration/3)
		defer cancel()
		if !errors.Is(p.lostCause(gctx, row.ID), idemtype.ErrJobCancelled) {
			return
		}
	}
	p.complete(fin, nil, p.Wake)
}

// lostCause is the cause to cancel job id's handler with when the store
// refused to renew its lease: ErrJobCancelled when the job was cancelled
// (in any process: the executor then gives back a key lease its claim
// took after the cancel), else ErrLeaseLost.
func (p *Producer) lostCause(ctx context.Context, id int64) error {
	row, err := p.store.JobGet(ctx, &store.JobGetParams{ID: id})
	if err == nil && row.State == idemtype.StateCancelled {
		return idemtype.ErrJobCancelled
	}
	return idemtype.ErrLeaseLost
}

// Releaser gives running jobs back (store.Maintenance's JobReleaseMany).
type Releaser interface {
	JobReleaseMany(ctx context.Context, p *store.JobReleaseManyParams) (int, error)
}

// GiveBack gives back the jobs running under token, the LeaseToken of a
// claim that failed without saying whether it committed, and returns how
// many there were. While the store fails it tries again (after 50 ms,
// doubling up to 2 s) until ctx ends or stop is closed; closing stop ends
// the waits between tries, not a try under way. It returns the last
// error when it gave up.
func GiveBack(ctx context.Context, stop <-chan struct{}, st Releaser, token string, now func() time.Time) (int, error) {
	wait := 50 * time.Millisecond
	for {
		n, err := st.JobReleaseMany(ctx, &store.JobReleaseManyParams{ClaimToken: token, Now: now()})
		if err == nil {
			return n, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("give back claim: %w", err)
		case <-stop:
			t.Stop()
			return 0, fmt.Errorf("give back claim (stopping): %w", err)
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// giveBack gives back the jobs of the failed claim made under token
// (GiveBack), for at most a lease; Stop ends its waits between tries and
// AbortClaim a try under way.
func (p *Producer) giveBack(ctx context.Context, token string) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseDuration)
	defer cancel()
	defer context.AfterFunc(p.abort, cancel)()
	n, err := GiveBack(gctx, ctx.Done(), p.store, token, p.cfg.Now)
	switch {
	case err != nil:
		p.cfg.Logger.Warn("could not give back the jobs of a failed claim; they wait for the rescuer",
			"queue", p.cfg.Queue, "err", err)
	case n > 0:
		p.cfg.Logger.Warn("gave back the jobs of a claim whose answer was lost", "queue", p.cfg.Queue, "jobs", n)
	}
}

// release gives back the jobs of a claim that returned while the producer
// was stopping (state available, attempt given back), so that any process
// can take them at once. It reports whether it did; if not, the caller runs
// them (Stop then waits for them as for any running job) rather than leave
// them to the rescuer.
func (p *Producer) release(ctx context.Context, jobs []*idemtype.JobRow) bool {
	leases := make([]store.Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = store.Lease{ID: j.ID, Token: j.LeaseToken}
	}
	n, err := p.store.JobReleaseMany(ctx, &store.JobReleaseManyParams{Leases: leases, Now: p.cfg.Now()})
	if err != nil {
		p.cfg.Logger.Warn("release of a claim made while stopping failed; running its jobs", "queue", p.cfg.Queue,
			"jobs", len(jobs), "err", err)
		return false
	}
	p.cfg.Logger.Info("released a claim made while stopping", "queue", p.cfg.Queue, "jobs", n)
	return true
}

// done frees the worker slot of a job whose handler returned.
func (p *Producer) done(_ *runningJob, cancel context.CancelCauseFunc) {
	cancel(nil)
	p.mu.Lock()
	p.active--
	p.mu.Unlock()
	p.Wake()
}
