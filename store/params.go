package store

import (
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// Parameters of the Store methods that address one row or take a time and a
// limit. Every method of the seam takes (ctx, *XParams).

// JobGetParams selects one job.
type JobGetParams struct {
	Tenant string // "" = any tenant
	ID     int64
}

// JobDeleteParams selects the job JobDelete deletes.
type JobDeleteParams struct {
	Tenant string // "" = any tenant
	ID     int64
	State  idemtype.JobState // the job is deleted only in this state
}

// AttemptListParams selects the job whose attempts AttemptList returns.
type AttemptListParams struct {
	Tenant string // "" = any tenant
	JobID  int64
}

// QueueStatsParams scopes QueueStats.
type QueueStatsParams struct {
	Tenant string    // "" = all tenants
	Now    time.Time // zero = time.Now()
}

// JobDurationsParams scopes JobDurations.
type JobDurationsParams struct {
	Tenant   string    // "" = all tenants
	Since    time.Time // jobs finished at or after Since
	PerQueue int       // at most this many per queue; <= 0 means 200
}

// JobDuration is when one completed job was due, started and finished.
type JobDuration struct {
	Queue                        string
	RunAt, StartedAt, FinishedAt time.Time
}

// JobKindStatsParams scopes JobKindStats.
type JobKindStatsParams struct {
	Tenant string    // "" = all tenants
	Since  time.Time // jobs created at or after Since
}

// JobKindStat summarises the jobs of one kind (seed 004's job health
// summary, seed 002's stats by action and status).
type JobKindStat struct {
	Kind  string
	Count int64
	// States counts the jobs per state; states without jobs are absent.
	States map[idemtype.JobState]int64
	// Started counts jobs claimed at least once or waiting to retry (the
	// base of a retry rate); Retried those past their first attempt or
	// waiting to retry.
	Started, Retried int64
	// Failed counts retryable and dead jobs.
	Failed int64
	// Runs counts the completed jobs that ran a handler (not completed from
	// the cache, started and finished set); the durations are theirs, in
	// milliseconds, 0 when Runs is 0.
	Runs          int64
	AvgDurationMS float64
	MaxDurationMS float64
}

// RecordGetParams selects one idempotency record.
type RecordGetParams struct {
	Tenant string
	Key    string
	Now    time.Time // records with ExpiresAt <= Now are gone; zero = time.Now()
}

// RecordDeleteParams selects the record RecordDelete deletes.
type RecordDeleteParams struct {
	Tenant string
	Key    string
	Now    time.Time // a lease live at Now refuses the delete; zero = time.Now()
}

// RecordReleaseParams selects the lease RecordRelease clears.
type RecordReleaseParams struct {
	Tenant string
	Key    string
	Owner  string // the lease is cleared only if Owner holds it
	// JobLease, when not nil, is the claim of the job run giving its key
	// back (Owner is JobOwner(JobLease.ID)): the lease is then kept while
	// that job runs under another lease token. A later run of the same job
	// (retried and claimed again since) takes the key under the same owner
	// name; the give-back of an earlier run must not free it.
	JobLease *Lease
	// Forget deletes the record instead, when Owner holds its lease and it
	// is in progress and of no job: an answer its key does not keep (the
	// HTTP middleware's empty claims) leaves nothing behind, and the key
	// may be used again. Ignored with JobLease.
	Forget bool
}

// RecordRenewParams extends a record lease its Owner holds (RecordRenew).
type RecordRenewParams struct {
	Tenant     string
	Key        string
	Owner      string
	LeaseUntil time.Time
	Now        time.Time
	// Stored, when not nil, is set to the lease end stored when the store
	// may store another than LeaseUntil truncated to microseconds
	// (pgstore's database clock shifts it); a store that stores
	// LeaseUntil may leave it.
	Stored *time.Time
}

// RecordStatsParams scopes RecordStats.
type RecordStatsParams struct {
	Tenant string    // "" = all tenants
	Now    time.Time // zero = time.Now()
}

// JobReleaseManyParams lists the running jobs JobReleaseMany gives back.
type JobReleaseManyParams struct {
	Leases []Lease
	// ClaimToken, when not "", also gives back every job running under
	// that lease token: the jobs of a JobClaim made with that LeaseToken
	// whose answer was lost (a connection cut after the commit), which
	// the caller cannot name by id.
	ClaimToken string
	Now        time.Time // zero = time.Now()
}

// JobRescueParams selects expired leases.
type JobRescueParams struct {
	Now   time.Time
	Limit int
}

// RescuedJob is one job JobRescue rescued, as the rescue left it (read
// from the rows it updated, in its transaction): what a report of the
// rescue needs, whatever happens to the job once it is committed.
type RescuedJob struct {
	ID      int64
	Tenant  string
	Queue   string
	Kind    string
	Attempt int               // the attempt whose lease was lost
	State   idemtype.JobState // retryable, or dead on the last attempt
}

// JobDeleteFinishedParams selects finished jobs for retention.
type JobDeleteFinishedParams struct {
	CompletedBefore time.Time
	CancelledBefore time.Time
	DeadBefore      time.Time
	Limit           int
	Now             time.Time
}

// LeaderParams is one election attempt.
type LeaderParams struct {
	Name  string
	Owner string
	TTL   time.Duration
	Now   time.Time
}

// JobDependantsRepairParams bounds one JobDependantsRepair call.
type JobDependantsRepairParams struct {
	// Now is the time the repair is as of, as a finish's time is for the
	// release it makes: a released job is scheduled when its RunAt is
	// later, available otherwise, and a cancelled one finishes at Now.
	// zero = time.Now().
	Now time.Time
	// CreatedBefore: only pending jobs created before it are considered
	// (a grace: a release is made in the transaction that finishes the
	// last dependency, so a job pending for longer with its dependencies
	// settled was missed). Zero = Now.
	CreatedBefore time.Time
	// After resumes the walk after this pending job (the Next of the call
	// before); zero = from the oldest pending job.
	After DependantsCursor
	Limit int // pending jobs examined, <= 0 = MaxBatch
}

// DependantsCursor is a position in the walk of JobDependantsRepair over
// the pending jobs, by creation time then id.
type DependantsCursor struct {
	CreatedAt time.Time
	ID        int64
}

// JobDependantsRepairResult is what one JobDependantsRepair call repaired.
type JobDependantsRepairResult struct {
	// Released are the jobs it examined and made available or scheduled
	// (a cancel it makes may release more, as any cancel does: the
	// dependants of the cancelled job that wait for any outcome).
	Released []int64
	// Cancelled are the jobs it cancelled: those it examined and, as a
	// cancel does, their pending dependants (transitively).
	Cancelled []int64
	// Next is where the next call resumes (After); zero when this call
	// examined fewer than Limit jobs: the walk reached the newest one and
	// starts again from the oldest.
	Next DependantsCursor
}

// JobPromoteParams bounds one JobPromote call.
type JobPromoteParams struct {
	Now   time.Time // zero = time.Now()
	Limit int       // <= 0 = MaxBatch
}

// RecordDeleteExpiredParams bounds one RecordDeleteExpired call.
type RecordDeleteExpiredParams struct {
	Now   time.Time // zero = time.Now()
	Limit int       // <= 0 = MaxBatch
}

// LeaderResignParams names the term LeaderResign ends.
type LeaderResignParams struct {
	Name  string
	Owner string // the term ends only if Owner leads
}

// APIKeyByHashParams selects an API key by the hash of its secret.
type APIKeyByHashParams struct {
	Hash string
}

// APIKeyRevokeParams selects the API key APIKeyRevoke revokes.
type APIKeyRevokeParams struct {
	ID  string
	Now time.Time // RevokedAt; zero = time.Now()
}
