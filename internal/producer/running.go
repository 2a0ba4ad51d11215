package producer

import (
	"context"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Running is the registry of the jobs this process executes, shared by the
// producers (which add and remove them), the heartbeater (which renews their
// leases) and the client (which cancels them and releases them at shutdown).
type Running struct {
	mu   sync.Mutex
	jobs map[int64]*runningJob
	wg   sync.WaitGroup // one per registered job

	// voided holds the claims cancelled here (CancelVoided) before their
	// producer registered them: add cancels such a registration at once.
	// Entries are forgotten at that registration or, pruned when now
	// reaches prune, once their keep ran out. Guarded by mu.
	voided map[store.Lease]voidedClaim
	prune  time.Time
}

// voidedClaim is a claim cancelled before it was registered.
type voidedClaim struct {
	until time.Time // forgotten after this
	cause error
}

// runningJob is a job this process is executing.
type runningJob struct {
	row    *idemtype.JobRow
	cancel context.CancelCauseFunc
	lost   bool // lease lost or released: drop the finish (guarded by Running.mu)
	// finishing: the handler returned and its finish waits in the
	// completer; the lease is still renewed, but not released at shutdown
	// (the completer writes the finish). Guarded by Running.mu.
	finishing bool
	// leaseUntil is when the lease ends as last known here: the claim's
	// lease end, then each renewal's (Renewed); zero when unknown.
	// Guarded by Running.mu.
	leaseUntil time.Time
}

// NewRunning returns an empty registry.
func NewRunning() *Running {
	return &Running{jobs: map[int64]*runningJob{}, voided: map[store.Lease]voidedClaim{}}
}

// add registers a job whose handler context cancel cancels. A run of the
// same job still registered under another lease token lost its lease (the
// store gave the job to this new claim): it is cancelled with ErrLeaseLost
// and its finish dropped, so one process never runs a job twice at once.
// A claim cancelled before its registration (CancelVoided) is registered
// lost and cancelled at once: its handler never starts, its finish is
// dropped.
func (r *Running) add(row *idemtype.JobRow, cancel context.CancelCauseFunc) *runningJob {
	j := &runningJob{row: row, cancel: cancel}
	if row.LeaseExpiresAt != nil {
		j.leaseUntil = *row.LeaseExpiresAt
	}
	lease := store.Lease{ID: row.ID, Token: row.LeaseToken}
	r.wg.Add(1)
	r.mu.Lock()
	old := r.jobs[row.ID]
	if old != nil && old.row.LeaseToken != row.LeaseToken {
		old.lost = true
	} else {
		old = nil
	}
	v, voided := r.voided[lease]
	if voided {
		delete(r.voided, lease)
		j.lost = true
	}
	r.jobs[row.ID] = j
	r.mu.Unlock()
	if old != nil {
		old.cancel(idemtype.ErrLeaseLost)
	}
	if voided {
		cancel(v.cause)
	}
	return j
}

// remove forgets j once its finish is written (or dropped); a later
// registration of the same job (claimed again after that finish) stays.
func (r *Running) remove(j *runningJob) {
	r.mu.Lock()
	if r.jobs[j.row.ID] == j {
		delete(r.jobs, j.row.ID)
	}
	r.mu.Unlock()
}

// keep decides the fate of the outcome of j, whose handler returned, in one
// step with Release: false when j was lost (its finish must be dropped);
// else j is marked finishing, so that Release no longer gives its lease
// back, and its finish must go to the completer. (Checked and marked in two
// steps, a shutdown in between released the lease of a job whose result
// was then refused, and the completed job ran again.)
func (r *Running) keep(j *runningJob) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j.lost {
		return false
	}
	j.finishing = true
	return true
}

// done marks one registered job's goroutine as returned (after remove).
func (r *Running) done() { r.wg.Done() }

// Len returns how many jobs are running.
func (r *Running) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.jobs)
}

// Cancel cancels the handler of a running job with cause and drops its
// finish; it does nothing for a job not running here.
func (r *Running) Cancel(id int64, cause error) {
	r.mu.Lock()
	j := r.jobs[id]
	if j != nil {
		j.lost = true
	}
	r.mu.Unlock()
	if j != nil {
		j.cancel(cause)
	}
}

// CancelVoided is Cancel for a job whose cancel in the store voided lease
// (store.JobCancelParams.Voided). When that claim is not registered here
// (it may have committed and be on its way back to its producer), it is
// remembered for keep after now, so that its registration is cancelled at
// once and its handler never starts. keep must cover the time a claim
// takes to come back (the producer bounds it by the lease); what is
// remembered and never registered (a claim of another process) is
// forgotten within two keeps.
func (r *Running) CancelVoided(lease store.Lease, now time.Time, keep time.Duration, cause error) {
	r.mu.Lock()
	j := r.jobs[lease.ID]
	if j != nil && j.row.LeaseToken == lease.Token {
		j.lost = true
	} else {
		// Not this claim's run: none, or a later claim of the job (retried
		// and claimed again here since; the notice came late), which this
		// notice must neither cancel nor mark lost.
		j = nil
		if !now.Before(r.prune) {
			for l, v := range r.voided {
				if !v.until.After(now) {
					delete(r.voided, l)
				}
			}
			r.prune = now.Add(keep)
		}
		r.voided[lease] = voidedClaim{until: now.Add(keep), cause: cause}
	}
	r.mu.Unlock()
	if j != nil {
		j.cancel(cause)
	}
}

// Voided returns how many cancelled claims are remembered (CancelVoided).
func (r *Running) Voided() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.voided)
}

// CancelLease is Cancel for the registration holding lease (not a later
// claim of the same job under another token).
func (r *Running) CancelLease(lease store.Lease, cause error) {
	r.mu.Lock()
	j := r.jobs[lease.ID]
	if j != nil && j.row.LeaseToken == lease.Token {
		j.lost = true
	} else {
		j = nil
	}
	r.mu.Unlock()
	if j != nil {
		j.cancel(cause)
	}
}

// CancelAll cancels the handler of every running job with cause.
func (r *Running) CancelAll(cause error) {
	r.mu.Lock()
	cancels := make([]context.CancelCauseFunc, 0, len(r.jobs))
	for _, j := range r.jobs {
		cancels = append(cancels, j.cancel)
	}
	r.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
}

// Leases returns the leases of the running jobs whose finish still counts.
func (r *Running) Leases() []store.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	var leases []store.Lease
	for id, j := range r.jobs {
		if !j.lost {
			leases = append(leases, store.Lease{ID: id, Token: j.row.LeaseToken})
		}
	}
	return leases
}

// Release marks every running job lost (its finish will be dropped) and
// returns their leases, to give back to the store at shutdown once their
// handlers were cancelled and have returned (given back first, a job could
// start elsewhere while its handler still ran here); a job whose finish
// already waits in the completer keeps its lease.
func (r *Running) Release() []store.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	var leases []store.Lease
	for id, j := range r.jobs {
		if !j.lost && !j.finishing {
			j.lost = true
			leases = append(leases, store.Lease{ID: id, Token: j.row.LeaseToken})
		}
	}
	return leases
}

// Renewed records that the leases renewed without an error (errs[i] nil,
// one per lease) now end at until.
func (r *Running) Renewed(leases []store.Lease, errs []error, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, l := range leases {
		if j := r.jobs[l.ID]; j != nil && i < len(errs) && errs[i] == nil && j.row.LeaseToken == l.Token {
			j.leaseUntil = until
		}
	}
}

// leaseEnd returns when lease ends as last known here (the claim's end,
// then each renewal's), or the zero time when it is not registered here.
func (r *Running) leaseEnd(lease store.Lease) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.jobs[lease.ID]; j != nil && j.row.LeaseToken == lease.Token {
		return j.leaseUntil
	}
	return time.Time{}
}

// Lapsed returns the leases of the running jobs whose handlers still run
// (not lost, not finishing) and whose lease, as last known here, ended at
// or before now: no renewal reached the store since it ended, so the
// rescuer may already have given the job to another process.
func (r *Running) Lapsed(now time.Time) []store.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	var leases []store.Lease
	for id, j := range r.jobs {
		if !j.lost && !j.finishing && !j.leaseUntil.IsZero() && !j.leaseUntil.After(now) {
			leases = append(leases, store.Lease{ID: id, Token: j.row.LeaseToken})
		}
	}
	return leases
}

// Wait blocks until every registered job's goroutine has returned.
func (r *Running) Wait() { r.wg.Wait() }
