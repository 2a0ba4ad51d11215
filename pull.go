package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/store"
)

// Limits of pull claims.
const (
	MaxClaimWait  = 60 * time.Second
	MaxClaimLimit = 100
	MaxLease      = time.Hour
)

// ClaimParams is a claim by a remote (pull) worker.
type ClaimParams struct {
	Tenant   string   // "" = the default tenant
	Queues   []string // at least one
	Kinds    []string // nil = any kind
	WorkerID string   // required
	Limit    int      // 1..MaxClaimLimit; default 1
	Lease    time.Duration
	// Wait long-polls up to this long (max MaxClaimWait) for a job.
	Wait time.Duration
	// Throttle, when not nil, is filled by Claim: whether a limit held
	// claimable work back in the last claim and when its budget returns.
	Throttle *ClaimThrottle
}

// ClaimThrottle tells a pull worker that a limit held work back (see
// ClaimParams.Throttle), so that it can wait exactly until the budget
// returns instead of polling.
type ClaimThrottle struct {
	// Throttled is true when a rate or concurrency limit (of the tenant,
	// the queue or both) left claimable work behind.
	Throttled bool
	// NextAvailableAt is when the earliest spent rate window that held
	// work back refills; zero when only concurrency limits did (budget
	// returns when a running job ends) or nothing was throttled.
	NextAvailableAt time.Time
}

// Claim hands jobs to a remote worker, each with a lease token that the
// worker must send back with Heartbeat, Complete and Fail. A job whose key
// already holds a completed result is completed here and never handed out.
// It returns an empty (never nil) slice when nothing came within Wait.
// Jobs claimed when ctx is already done (the caller went away) are given
// back at once with their attempt (one cancelled meanwhile has its cancel
// acknowledged: its hold ends), and the slice is empty.
func (c *Client) Claim(ctx context.Context, p ClaimParams) ([]*JobRow, error) {
	if err := validateClaim(&p, c.cfg.LeaseDuration); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(p.Wait)
	poll := time.NewTicker(c.cfg.PollInterval)
	defer poll.Stop()
	for {
		signal, stopWaiting := c.notifier.WaitInserted(p.Queues)
		var report store.ClaimReport
		jobs, err := c.claimCut(ctx, &p, &report)
		if p.Throttle != nil {
			*p.Throttle = ClaimThrottle{Throttled: report.Throttled, NextAvailableAt: report.NextRefill}
		}
		if err != nil || len(jobs) > 0 {
			stopWaiting()
			return jobs, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			stopWaiting()
			return []*JobRow{}, nil
		}
		if report.Throttled && !report.NextRefill.IsZero() {
			// A spent rate window: nothing comes before it refills
			// (unless a limit is changed, which the poll notices).
			left = min(left, max(0, report.NextRefill.Sub(c.now())))
		}
		timer := time.NewTimer(left)
		select {
		case <-ctx.Done():
			timer.Stop()
			stopWaiting()
			return []*JobRow{}, nil
		case <-signal:
		case <-poll.C:
		case <-timer.C:
		}
		timer.Stop()
		stopWaiting()
	}
}

func validateClaim(p *ClaimParams, defLease time.Duration) error {
	if len(p.Queues) == 0 {
		return idemtype.Invalid("queues", "at least one queue")
	}
	for _, q := range p.Queues {
		if err := ValidateName("queues", q); err != nil {
			return err
		}
	}
	if err := ValidateName("worker_id", p.WorkerID); err != nil {
		return err
	}
	for _, k := range p.Kinds {
		if err := ValidateName("kinds", k); err != nil {
			return err
		}
	}
	setDefault(&p.Limit, 1)
	setDefault(&p.Lease, defLease)
	if p.Limit < 1 || p.Limit > MaxClaimLimit {
		return idemtype.Invalid("limit", "must be between 1 and %d", MaxClaimLimit)
	}
	if p.Lease < time.Second || p.Lease > MaxLease {
		return idemtype.Invalid("lease", "must be between 1s and %s", MaxLease)
	}
	if p.Wait < 0 || p.Wait > MaxClaimWait {
		return idemtype.Invalid("wait", "must be between 0s and %s", MaxClaimWait)
	}
	return nil
}

// claimCut runs one claim that ctx does not cut off: on PostgreSQL a commit
// that succeeds while the call's context is cancelled reports an error,
// and a claim whose caller went away (a pull client that disconnected)
// can no longer be handed over; either way the claimed jobs would stay
// running, owned by nobody, until the rescuer takes them back with an
// attempt used. The claim is bounded by its lease instead, and when ctx
// is done once it returns, its jobs are given back at once with their
// attempt (JobReleaseMany), the cancels of those cancelled meanwhile
// acknowledged (ackCancels), and the claim is empty.
func (c *Client) claimCut(ctx context.Context, p *ClaimParams, report *store.ClaimReport) ([]*JobRow, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Lease)
	defer cancel()
	token := store.NewToken()
	jobs, at, err := c.claimOnce(cctx, p, token, report)
	if err != nil {
		// The claim may have committed with its answer lost, or a later
		// step (settling cached jobs, capping leases) failed: nobody
		// would run what it took. Give back what runs under its token,
		// trying for at most a few seconds, on a context of its own: a
		// claim cut off by its timeout left cctx none.
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), min(p.Lease, 5*time.Second))
		defer gcancel()
		if n, gerr := producer.GiveBack(gctx, nil, c.store, token, c.now); gerr != nil {
			c.logger.Warn("could not give back the jobs of a failed claim; they wait for the rescuer",
				"worker_id", p.WorkerID, "err", gerr)
		} else if n > 0 {
			c.logger.Warn("gave back the jobs of a failed claim", "worker_id", p.WorkerID, "jobs", n)
		}
		return nil, err
	}
	if len(jobs) == 0 || ctx.Err() == nil {
		c.observeHanded(jobs, at)
		return jobs, nil
	}
	leases := make([]store.Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = store.Lease{ID: j.ID, Token: j.LeaseToken}
	}
	n, err := c.store.JobReleaseMany(cctx, &store.JobReleaseManyParams{Leases: leases, Now: c.now()})
	if err != nil {
		c.logger.Warn("release of a claim whose caller went away failed; its jobs wait for the rescuer",
			"worker_id", p.WorkerID, "jobs", len(jobs), "err", err)
		c.observeHanded(jobs, at)
		return jobs, nil
	}
	if n < len(jobs) {
		// Not given back: cancelled since the claim (or their leases
		// lost), and nobody runs them.
		c.ackCancels(cctx, jobs)
	}
	c.logger.Info("released a claim whose caller went away", "worker_id", p.WorkerID, "jobs", n)
	return []*JobRow{}, nil
}

// claimOnce claims and settles keyed jobs that need no worker, and returns
// the others with the claim's time. The observer is told of what committed
// only: of a settled job (its claim, cache hit and finish) once its finish
// is written; of the jobs handed out by claimCut (observeHanded), once the
// claim stands. A claim that fails after JobClaim, or whose caller went
// away, gives its jobs back (claimCut), and the next claim of them is the
// one counted.
func (c *Client) claimOnce(ctx context.Context, p *ClaimParams, token string, report *store.ClaimReport) ([]*JobRow, time.Time, error) {
	now := c.now()
	jobs, err := c.store.JobClaim(ctx, &store.JobClaimParams{Tenant: c.tenant(p.Tenant), Queues: p.Queues,
		Kinds: p.Kinds, WorkerID: p.WorkerID, Limit: p.Limit, LeaseUntil: now.Add(p.Lease), Now: now, Report: report,
		LeaseToken: token})
	if err != nil {
		return nil, now, fmt.Errorf("claim: %w", store.Classify(c.store, err))
	}
	out := make([]*JobRow, 0, len(jobs))
	var settled []*store.JobFinishParams
	var settledRows []*JobRow
	keys := c.exec.AcquireKeys(ctx, jobs)
	for _, j := range jobs {
		fin, run := c.exec.Settle(ctx, j, keys[j.ID])
		if run {
			out = append(out, j)
			continue
		}
		fin.FinishedAt = c.now()
		settled, settledRows = append(settled, fin), append(settledRows, j)
	}
	if len(settled) > 0 {
		errs, err := c.store.JobFinishMany(ctx, settled)
		if err != nil {
			// Written all the same (an answer lost): counted once, here. One
			// deadline for every read-back, so a hanging store delays the
			// claim's error answer by finishCheckTimeout at most.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishCheckTimeout)
			for i, fin := range settled {
				if c.finishWritten(rctx, settledRows[i], fin) {
					c.observeClaim(settledRows[i], now)
					c.observeWritten(settledRows[i], fin)
					c.finished(fin.ID)
				}
			}
			cancel()
			return nil, now, fmt.Errorf("claim: settle cached jobs: %w", err)
		}
		for i, fin := range settled {
			if i >= len(errs) || errs[i] == nil { // written (not refused: its lease lost meanwhile)
				c.observeClaim(settledRows[i], now)
				c.observeWritten(settledRows[i], fin)
			}
			c.finished(fin.ID)
		}
	}
	out = c.dropVoided(ctx, out, now.Add(p.Lease))
	if err := c.capLeases(ctx, out, now); err != nil {
		return nil, now, err
	}
	return out, now, nil
}

// observeHanded reports the jobs a pull claim at hands out: their claim,
// and a cache miss for each keyed one (its handler runs).
func (c *Client) observeHanded(jobs []*JobRow, at time.Time) {
	for _, j := range jobs {
		c.observeClaim(j, at)
		if j.IdempotencyKey != "" {
			c.exec.CountMiss(j)
		}
	}
}

// capLeases shortens the leases of claimed jobs to their timeout: a pull
// worker's lease never outlives the attempt's deadline (StartedAt + the
// job's timeout), so a worker that overruns loses the job to the rescuer.
// Jobs with one deadline share one store call.
func (c *Client) capLeases(ctx context.Context, jobs []*JobRow, now time.Time) error {
	// The deadline is an instant, not a lease length: it is stored as
	// given (Absolute; on PostgreSQL's own clock the store would keep its
	// now plus the deadline's distance from the caller's now, later by the
	// time since the claim and by the caller clock's lag), and the rows
	// report it. The deadline is read on the caller's clock (StartedAt):
	// a caller whose clock runs behind the database's has the lease end,
	// by the database's clock, that lag before the timeout.
	byDeadline := map[time.Time][]store.Lease{}
	for _, j := range jobs {
		deadline, ok := c.deadline(j)
		if ok && j.LeaseExpiresAt != nil && deadline.Before(*j.LeaseExpiresAt) {
			deadline = deadline.Truncate(time.Microsecond) // as the stores keep it
			byDeadline[deadline] = append(byDeadline[deadline], store.Lease{ID: j.ID, Token: j.LeaseToken})
			j.LeaseExpiresAt = &deadline
		}
	}
	for deadline, leases := range byDeadline {
		if _, err := c.store.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{Leases: leases, Until: deadline, Now: now,
			Absolute: true}); err != nil {
			return fmt.Errorf("claim: cap leases at the timeout: %w", err)
		}
	}
	return nil
}

// storedEnd is the lease end a store reported having stored (Ends of
// store.JobHeartbeatParams), else until, which it stored as given.
func storedEnd(until, stored time.Time) time.Time {
	if stored.IsZero() {
		return until
	}
	return stored.UTC()
}

// deadline returns when the running attempt of j times out, if it has a
// timeout (Config.Timeout, TimeoutByQueue, TimeoutByKind).
func (c *Client) deadline(j *JobRow) (time.Time, bool) {
	d := c.cfg.timeout(j)
	if d <= 0 || j.StartedAt == nil {
		return time.Time{}, false
	}
	return j.StartedAt.Add(d), true
}

// Heartbeat extends the lease of a job claimed by a remote worker and
// returns the new expiry; ErrLeaseLost when the lease is gone. The lease
// never extends past the job's timeout; a heartbeat at or after it fails
// the attempt as a timeout (retryable) and returns an error wrapping both
// ErrLeaseLost and ErrJobTimeout.
func (c *Client) Heartbeat(ctx context.Context, tenant string, id int64, token string, lease time.Duration) (time.Time, error) {
	row, err := c.JobGet(ctx, tenant, id)
	if err != nil {
		return time.Time{}, err
	}
	if err := ValidateKey("lease_token", token); err != nil {
		return time.Time{}, err
	}
	setDefault(&lease, c.cfg.LeaseDuration)
	if lease < time.Second || lease > MaxLease {
		return time.Time{}, idemtype.Invalid("lease", "must be between 1s and %s", MaxLease)
	}
	now := c.now()
	until := now.Add(lease)
	capped := false // at the timeout's deadline: an instant, stored as given (as capLeases does)
	if deadline, ok := c.deadline(row); ok && row.State == StateRunning && row.LeaseToken == token {
		if !now.Before(deadline) {
			return time.Time{}, c.timeoutRemote(ctx, tenant, row, token)
		}
		if deadline.Before(until) {
			until, capped = deadline, true
		}
	}
	// The time the stores keep (microseconds): the caller compares it
	// with the lease end read back later.
	until = until.Truncate(time.Microsecond)
	ends := make([]time.Time, 1) // the end stored, when the store's clock moved it
	errs, err := c.store.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{
		Leases: []store.Lease{{ID: id, Token: token}}, Until: until, Now: now, Ends: ends, Absolute: capped})
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat: %w", err)
	}
	if len(errs) > 0 && errs[0] != nil {
		return time.Time{}, c.lostLease(ctx, tenant, id, token, errs[0])
	}
	return storedEnd(until, ends[0]), nil
}

// lostLease explains err, a refusal of a call with the lease token of job
// id, when it is ErrLeaseLost: it names the job's state as read now (the
// lease ended; the job runs under another lease, was cancelled, or is
// finished or waiting for a retry), so that a worker learns whether its
// work was superseded, and still wraps err. When the read fails, err is
// returned as it is.
func (c *Client) lostLease(ctx context.Context, tenant string, id int64, token string, err error) error {
	if !errors.Is(err, ErrLeaseLost) {
		return err
	}
	row, gerr := c.JobGet(ctx, tenant, id)
	if gerr != nil {
		return err
	}
	var why string
	switch {
	case row.State == StateRunning && row.LeaseToken == token:
		why = "its lease ended" // not yet taken back by the rescuer
	case row.State == StateRunning:
		why = fmt.Sprintf("runs attempt %d under another lease", row.Attempt)
	case row.State == StateCancelled:
		why = "was cancelled"
	default:
		why = fmt.Sprintf("is %s at attempt %d", row.State, row.Attempt)
	}
	return fmt.Errorf("%w (job %d %s)", err, id, why)
}

// Complete records the success of a remotely worked job. Repeating it with
// the same token and result returns the job again; another result is
// ErrLeaseLost.
func (c *Client) Complete(ctx context.Context, tenant string, id int64, token string, result json.RawMessage) (*JobRow, error) {
	if len(result) > 0 {
		if err := ValidateJSON("result", result); err != nil {
			return nil, err
		}
	}
	if err := ValidateKey("lease_token", token); err != nil {
		return nil, err
	}
	row, err := c.JobGet(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	fin := &store.JobFinishParams{ID: id, LeaseToken: token}
	c.exec.SetOutcome(fin, row, executor.NullIfEmpty(result), nil)
	return c.finishRemote(ctx, tenant, row, fin)
}

// FailParams describes a failed remote attempt.
type FailParams struct {
	Error string
	// NoRetry sends the job straight to dead.
	NoRetry bool
	// RetryAfter overrides the backoff policy when not nil.
	RetryAfter *time.Duration
	// ErrorCode is the failure's code (seed 004's error_code), stored as
	// the job's ErrorCode; "" = none. 1–255 printable ASCII without spaces.
	ErrorCode string
}

// Fail records the failure of a remotely worked job: retryable with backoff,
// or dead when attempts are exhausted or NoRetry is set. Repeating it with
// the same token, error, error code and outcome (a retry after a lost
// answer) returns the job again while it was not claimed, requeued or
// retried since; another failure is ErrLeaseLost (store.FinishRepeats).
func (c *Client) Fail(ctx context.Context, tenant string, id int64, token string, p FailParams) (*JobRow, error) {
	if p.RetryAfter != nil && *p.RetryAfter < 0 {
		return nil, idemtype.Invalid("retry_after", "must not be negative")
	}
	if err := ValidateText("error", p.Error, MaxErrorBytes); err != nil {
		return nil, err
	}
	if err := ValidateKey("lease_token", token); err != nil {
		return nil, err
	}
	if p.ErrorCode != "" {
		if err := ValidateName("error_code", p.ErrorCode); err != nil {
			return nil, err
		}
	}
	row, err := c.JobGet(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if p.Error == "" {
		p.Error = "failed"
	}
	fin := &store.JobFinishParams{ID: id, LeaseToken: token}
	var cause error = remoteError(p.Error)
	if p.ErrorCode != "" {
		cause = JobErrorCode(p.ErrorCode, cause)
	}
	switch {
	case p.NoRetry:
		cause = JobPermanent(cause)
	case p.RetryAfter != nil:
		cause = JobRetryAfter(*p.RetryAfter, cause)
	}
	c.exec.SetOutcome(fin, row, nil, cause)
	fin.Error = store.StorableError(p.Error) // validated: within MaxErrorBytes, so whole
	return c.finishRemote(ctx, tenant, row, fin)
}

// timeoutRemote fails the running attempt of row (lease token) as timed out.
func (c *Client) timeoutRemote(ctx context.Context, tenant string, row *JobRow, token string) error {
	fin := &store.JobFinishParams{ID: row.ID, LeaseToken: token}
	c.exec.SetOutcome(fin, row, nil, fmt.Errorf("%w after %v", ErrJobTimeout, c.cfg.timeout(row)))
	if _, err := c.finishRemote(ctx, tenant, row, fin); err != nil {
		return err
	}
	return fmt.Errorf("job %d: %w: %w", row.ID, ErrLeaseLost, ErrJobTimeout)
}

type remoteError string

func (e remoteError) Error() string { return string(e) }

func (c *Client) finishRemote(ctx context.Context, tenant string, row *JobRow, fin *store.JobFinishParams) (*JobRow, error) {
	now := c.now()
	fin.FinishedAt = now
	if row.StartedAt != nil {
		fin.DurationMS = now.Sub(*row.StartedAt).Milliseconds()
	}
	errs, err := c.store.JobFinishMany(ctx, []*store.JobFinishParams{fin})
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishCheckTimeout)
		written := c.finishWritten(rctx, row, fin)
		cancel()
		if written {
			// Its answer was lost, not the write: the worker's retry is a
			// repeat, which counts nothing, so it is counted here (the
			// request still answers the error: the worker retries).
			c.observeWritten(row, fin)
			c.finished(row.ID)
		}
		return nil, fmt.Errorf("finish job %d: %w", row.ID, store.Classify(c.store, err))
	}
	if len(errs) > 0 && errs[0] != nil {
		return nil, c.lostLease(ctx, tenant, row.ID, fin.LeaseToken, errs[0])
	}
	if !fin.Repeated { // a repeated completion or failure (a client's retry) was counted once already
		c.observeWritten(row, fin)
	}
	c.finished(row.ID)
	return c.JobGet(ctx, tenant, row.ID)
}

// finishCheckTimeout bounds the read-backs (finishWritten) that follow a
// failed finish write, all of one request's together: the request's error
// answer comes at most this much later.
const finishCheckTimeout = 2 * time.Second

// finishWritten reports whether the finish fin of the attempt row, whose
// write failed, was written all the same (a PostgreSQL commit whose answer
// the network lost, a write the caller's context gave up on while the
// store went on): the job left running at that attempt in the finish's
// state, with its error. Only the holder of the attempt's lease finishes
// it so (the rescuer and a cancel leave another state or error). Callers
// give it a context of its own, bounded by finishCheckTimeout: the
// caller's may be what failed.
func (c *Client) finishWritten(ctx context.Context, row *JobRow, fin *store.JobFinishParams) bool {
	got, err := c.store.JobGet(ctx, &store.JobGetParams{Tenant: row.Tenant, ID: row.ID})
	if err != nil || got.Attempt != row.Attempt || got.State == StateRunning || got.State != fin.State {
		return false
	}
	return fin.State == StateCompleted || got.LastError == fin.Error
}
