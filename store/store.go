// Package store is the one seam between the idem runtime and the databases.
//
// It is an internal contract: users of idem never call it directly, they pass
// a Store built by a backend (sqlitestore, pgstore) to idem.NewClient. Every
// backend passes the same conformance suite, package storetest, so a
// behaviour that exists for one store exists for all.
//
// Rules every implementation keeps:
//   - Every method that takes a Now uses it as "now" for the whole operation
//     (the runtime injects its clock); a zero Now means time.Now().
//   - Uniqueness (idempotency keys) is decided by a unique constraint with
//     INSERT … ON CONFLICT, never by a read followed by a write.
//   - A tenant of "" in a read or a filter means "every tenant" (admin use);
//     otherwise a row of another tenant behaves exactly as if it did not exist
//     (idemtype.ErrNotFound).
//   - Errors wrap the sentinels of package idemtype so callers can use
//     errors.Is: ErrNotFound, ErrLeaseLost, ErrWrongState, ErrKeyReused
//     (as *idemtype.KeyReusedError), ErrInvalid.
//   - Times are stored with at least microsecond precision and returned in UTC.
//   - Every method takes (ctx, *XParams) (or a slice of them for the Many
//     forms that decide items one by one); a nil slice or batch is a no-op.
//   - After Close every call fails with ErrClosed (errors.Is
//     idemtype.ErrClosed); Close is idempotent.
//   - JobList pages hold at most MaxListLimit jobs; maintenance calls and
//     JobRetryMany by filter take at most MaxBatch rows when their Limit is
//     <= 0 (see ListLimit, BatchLimit).
//   - A repeated completion (same job, same lease token) succeeds without
//     writing when its result is the same JSON value as the committed one
//     (SameResult: key order and whitespace do not matter), setting the
//     item's Repeated, and fails with ErrLeaseLost otherwise. So does a
//     repeated failure (same job, same lease token, same next state,
//     outcome, error and error code, the job not claimed, requeued or
//     retried since): FinishRepeats decides both.
//   - A rescued job's LastError is RescuedError.
//
// Optional capabilities are separate interfaces a Store may implement
// (Listener); callers test for them with a type assertion.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// Store is implemented by every backend. It is deliberately wide: it is the
// only interface between the runtime and the databases.
type Store interface {
	Jobs
	Records
	Maintenance
	Leader
	APIKeys
	Targets
	Events
	FlowControl
	Schedules

	// Migrate brings the schema to the newest version. It is safe to call
	// from several processes at once.
	Migrate(ctx context.Context) error
	// Ping is one cheap round trip that proves the store answers (the
	// readiness probe): no table is read; ErrClosed after Close.
	Ping(ctx context.Context) error
	// Close releases the store's connections; callers waiting on a batch
	// still queued get ErrClosed, and every later call fails with ErrClosed.
	// It is idempotent.
	Close() error
}

// Listener is an optional capability of a Store: a LISTEN/NOTIFY-like
// signal that jobs became available, so workers need not wait for their next
// poll. pgstore implements it; sqlitestore does not (its writer is in the
// same process, which signals itself; what its callers cannot tell it
// announces through Announcer). Callers test for it with a type
// assertion and keep polling as the fallback either way.
type Listener interface {
	// Listen returns a channel that receives the queue of each job made
	// available by an insert (or a retry, promotion, release) committed
	// after Listen returned — also the queues of a JobClaim that left
	// available due jobs it promoted, sent after its commit — and ""
	// when notifications may have been lost
	// (after a reconnect), meaning "any queue may have jobs". Values may
	// be merged within one transaction. It also receives, for each running
	// job cancelled by JobCancel (in any process), CancelNotice of the
	// lease the cancel voided, sent before the queue values of the same
	// transaction (ParseCancelNotice tells the two apart); a reconnect may
	// lose those too. The channel closes when ctx ends.
	Listen(ctx context.Context) (<-chan string, error)
}

// Announcer is an optional capability of a Store that has no Listener
// (sqlitestore: no other process hears its writes): it tells the functions
// given to Announce, after the commit, the queues where a store write that
// its caller cannot see through made a job available — a FIFO partition
// whose cancelled job stopped holding it (JobRescue ending a hold, a
// refused JobFinishMany acknowledging the cancel), the queues of the
// pending dependants a write released (a finish, a cancel, a rescue to
// dead, such an end of a hold, JobDependantsRepair), and the queues where
// a JobClaim left available due jobs it promoted. A Listener store
// announces those through Listen instead. fn must not block nor write to
// the store; it is called without the store's own lock held, so it may
// subscribe or stop a subscription (the notifier ends its subscription
// when the last long poll it wakes is gone). The returned function stops
// the announcements to fn.
type Announcer interface {
	Announce(fn func(queues []string)) (stop func())
}

// Jobs is the part of the Store that creates, claims and finishes jobs.
type Jobs interface {
	// JobInsertMany inserts jobs in one transaction and returns one result
	// per item, in order. An item that fails (key reused with another
	// request, a dependency that does not exist in the tenant:
	// UnknownDependency) fails only itself: its Err is set and the others
	// are inserted.
	//
	// Idempotency keys: for an item with an IdempotencyKey, the record
	// (Tenant, Key) decides. If there is no live record, or its dedup window
	// has passed (DedupUntil not nil and <= Now), or the job it points to no
	// longer exists (JobDelete while the window was open), the job is created
	// and the record points to it (an existing completed result stays
	// cached until its own expiry). If the window is still open, no job is
	// created: the result holds the job the record points to with Existing
	// true — or, when Fingerprint differs, Err is a *idemtype.KeyReusedError.
	// Concurrent inserts of one key must produce exactly one job, whatever
	// the interleaving.
	//
	// Initial state: cancelled if a dependency is already dead or cancelled
	// (unless DependsOnFinished); pending while a dependency is unfinished
	// (with DependsOnFinished, also while a cancelled one still holds its
	// lease: JobCancel); scheduled when RunAt > Now; available otherwise.
	JobInsertMany(ctx context.Context, p *JobInsertManyParams) ([]JobInsertResult, error)

	// JobGet returns the job ID of Tenant (Tenant "" matches any tenant);
	// ErrNotFound when there is none.
	JobGet(ctx context.Context, p *JobGetParams) (*idemtype.JobRow, error)

	// JobList returns jobs matching the filter, newest (highest id) first,
	// and the cursor of the next page (0 on the last page).
	JobList(ctx context.Context, p *JobListParams) (jobs []*idemtype.JobRow, next int64, err error)

	// JobClaim atomically takes up to Limit claimable jobs and returns them
	// running, with Attempt incremented, StartedAt = Now, LeaseToken the
	// params' (a fresh random one per job when that is ""), LeaseExpiresAt = LeaseUntil, WorkerID set, and an attempt
	// record (outcome running) inserted for each.
	//
	// Claimable: state available, or scheduled or retryable with RunAt <= Now (each claim first makes up to
	// 1,000 of those of each of its queues available, earliest RunAt first; more due ones wait for the next
	// claims or JobPromote, whatever their Priority or Tenant), in one of Queues (and Kinds, when given; and
	// Tenant, when not ""), and — when the job has a PartitionKey — it is the head of its
	// partition: no job with the same (Tenant, Queue, PartitionKey) and a
	// lower id is unfinished (pending, scheduled, available, running or
	// retryable), and no other job of the partition is running or holds it
	// (cancelled while it ran, until acknowledged: JobCancel) (a dead or
	// cancelled job retried while a later job of its partition runs waits
	// for that job to finish, then goes first: JobRetryMany). Partitions are scoped by tenant: two tenants using the same partition key never block each other.
	// Fairness: a claim visits up to Limit tenants with claimable work,
	// rotating from where the store's previous claim of the queue stopped,
	// and takes up to ceil(Limit/tenants) jobs of each; so a tenant with a
	// huge backlog never delays another by more than one round.
	// Within a tenant, order is Priority descending, then RunAt, then id.
	// The result is ordered the same way. Concurrent claims never return
	// the same job twice. A claimed job whose key's record is its own (it
	// names the job, is in progress, not expired at Now, and stores no
	// lease) comes back with KeyHeld set, read in the claim's own
	// statement or transaction, so that its attempt skips RecordAcquire.
	//
	// Flow control (FlowControl): work of a paused scope is not claimed;
	// limits cap what the claim takes (rate: jobs started in the current
	// window; concurrency: jobs running, and cancelled jobs still holding
	// their partition: JobCancel), decided under a lock so that
	// concurrent claims of all processes never exceed them together.
	// Throttled work stays claimable, no attempt used; Report says when
	// the budget refills.
	JobClaim(ctx context.Context, p *JobClaimParams) ([]*idemtype.JobRow, error)

	// JobHeartbeatMany extends the leases of running jobs to Until (and the
	// execution lease of their idempotency record, when they hold it). The
	// result has one error per lease: nil, or ErrLeaseLost when the job is
	// no longer running under that token. A lease that has expired
	// (LeaseExpiresAt <= Now) is lost too, even before the rescuer has run:
	// it is not extended.
	JobHeartbeatMany(ctx context.Context, p *JobHeartbeatParams) ([]error, error)

	// JobFinishMany records the end of attempts, in one transaction. The
	// result has one error per item: nil, ErrLeaseLost when the job is not
	// running under LeaseToken. An item refused so whose job was cancelled
	// while it ran under LeaseToken and still holds its lease acknowledges
	// the cancel: the hold ends (JobCancel), and its pending dependants
	// inserted with DependsOnFinished are released as of that item's
	// FinishedAt once all their dependencies are finished. Repeating a completion with the same token
	// and the same Result (SameResult: JSON-equal, key order and
	// whitespace do not matter) on a job that is already completed is not
	// an error (nil) and writes nothing; with another result it is
	// ErrLeaseLost. A finish with
	// the token of a job that is still running is accepted even when its
	// lease has expired (LeaseExpiresAt <= Now) but the rescuer has not
	// taken it yet: the work is done, refusing it would only cause a rerun.
	//
	// Side effects in the same transaction:
	//   - the attempt record gets FinishedAt, DurationMS, Outcome, Error,
	//     HTTPStatus and Target;
	//   - completed: dependants whose dependencies have all completed become
	//     available (scheduled if their RunAt is in the future); when the job
	//     has an idempotency key and not WasCached, the record becomes
	//     completed with RecordResult, ResultHash, SizeBytes, Compressed,
	//     ResultJobID = the job, CompletedAt = FinishedAt, ResultExpiresAt =
	//     FinishedAt + the job's ResultTTL, ExpiresAt = max(DedupUntil,
	//     ResultExpiresAt); the lease is cleared;
	//   - dead or cancelled: pending dependants (transitively) are cancelled
	//     with LastError naming the dependency and its state — except those
	//     inserted with DependsOnFinished, which are released instead once
	//     all their dependencies are finished (completed, dead or cancelled,
	//     a cancelled one once its hold ended: JobCancel; a completion
	//     releases them under the same rule). Two dependencies
	//     finishing at once in different transactions release such a job
	//     exactly once;
	//   - any state: the record's execution lease is released if the job
	//     holds it; when the job's dedup window is 0 and the job reached a
	//     final state, DedupUntil = FinishedAt and ExpiresAt =
	//     max(FinishedAt, the result expiry) — the result expiry being the
	//     completed record's ResultExpiresAt, set by the ResultTTL of the job
	//     that stored the result (maybe another job of the key): a cached
	//     result is never dropped before its own expiry, nor kept past it
	//     (this holds too when an insert reopens a completed record, whatever
	//     the new job's ResultTTL: its ExpiresAt is nil for a window of 0,
	//     else max(DedupUntil, the result expiry));
	//   - Snooze: Attempt is decremented (the attempt does not count).
	JobFinishMany(ctx context.Context, p []*JobFinishParams) ([]error, error)

	// JobCancel cancels a job that is not finished (running jobs included:
	// their lease is voided, so the worker's next heartbeat or finish gets
	// ErrLeaseLost; Voided receives that lease). Side effects as for a
	// cancelled finish. A finished job
	// is ErrWrongState; unknown (or other tenant) is ErrNotFound.
	//
	// A running job keeps its lease (the hold): JobClaim treats it as
	// running — for every concurrency limit of its scope, LimitList's
	// usage included, and, with a PartitionKey, for the head rule — and
	// retention (JobDeleteFinished) keeps it, until a JobFinishMany item
	// with the voided lease's token (refused: ErrLeaseLost) acknowledges
	// that its handler returned, or until JobRescue finds its lease ended
	// (the job stays cancelled). A JobRetryMany of a job that still holds
	// gives it a RunAt no earlier than the lease's end, and until then the
	// job still holds its slot and its partition against the earlier jobs
	// that wait for it (a cancel before it runs again keeps that hold,
	// which the voided lease's refused finish ends as above: that lease's
	// token never matches the job's later runs, which get tokens of their
	// own).
	JobCancel(ctx context.Context, p *JobCancelParams) (*idemtype.JobRow, error)

	// JobRetryMany moves dead or cancelled jobs (only those in FromStates)
	// back to available — scheduled when RunAt is in the future — with
	// Attempt = 0, FinishedAt cleared. A job with dependencies takes the
	// state JobInsertMany would give it now ("Initial state"): pending
	// while a dependency is unfinished; cancelled again (FinishedAt = Now,
	// LastError naming the dependency) when one is dead or cancelled,
	// unless it waits for any outcome (DependsOnFinished); jobs retried
	// together are reopened dependencies first, so a dependant retried
	// with its dependency waits for it (pending). A retried job of
	// a FIFO partition waits while a later job of it runs (JobClaim). A
	// retried job left unfinished whose key has a dedup window of 0 and
	// whose record still names it blocks its key again until it finishes
	// (DedupUntil and ExpiresAt nil, as after its insert; a completed
	// record only while its result is live). It selects by IDs, or by Filter
	// when IDs is empty, up to Limit. It returns the rows it moved.
	//
	// A job that never started (Attempt 0, no attempt stored), waits for
	// its dependencies to complete (not DependsOnFinished) and has a
	// dependency that no longer exists is refused (RetryRefusal): a
	// deleted dependency may have died (DLQ delete) or completed
	// (retention), and the job never ran to show which. By IDs, any
	// refused job fails the call with a *RetryRefusedError (ErrInvalid)
	// listing them all, and no job moves; by Filter, refused jobs are
	// skipped (they stay as they are and do not count towards Limit). A job
	// that started once had its dependencies satisfied then and is retried
	// even if one was deleted since.
	JobRetryMany(ctx context.Context, p *JobRetryManyParams) ([]*idemtype.JobRow, error)

	// JobDelete deletes the job ID (and its attempts) only if it is in
	// State; ErrNotFound when there is no such job in that state in the
	// tenant. The id is never reused.
	JobDelete(ctx context.Context, p *JobDeleteParams) error

	// JobResolve marks the dead job ID resolved at Now with Note and
	// returns it. Resolving a resolved job changes nothing and returns it
	// (the first resolution is kept). A job that is not dead is
	// ErrWrongState; unknown (or other tenant) is ErrNotFound.
	JobResolve(ctx context.Context, p *JobResolveParams) (*idemtype.JobRow, error)

	// BatchCreate creates the batch (Tenant, Key) and its jobs in one
	// transaction, the jobs it creates carrying the batch's id (an item
	// whose key dedups onto an existing job, Existing, gets that job, which
	// stays in its own batch, if any). When the batch exists
	// it returns it with Existing set and creates nothing. A job that
	// cannot be created (any JobInsertResult.Err) fails the whole call
	// with that error and creates nothing.
	BatchCreate(ctx context.Context, p *BatchCreateParams) (*BatchCreateResult, error)

	// BatchGet returns the batch ID; unknown (or other tenant) is
	// ErrNotFound. Its jobs are listed with JobFilter.BatchID.
	BatchGet(ctx context.Context, p *BatchGetParams) (*idemtype.Batch, error)

	// AttemptList returns the attempts of job JobID, oldest first (an
	// attempt is written once, when it ends); ErrNotFound when the job does
	// not exist in the tenant.
	AttemptList(ctx context.Context, p *AttemptListParams) ([]*idemtype.Attempt, error)

	// QueueStats counts jobs per queue and state as of Now (Tenant "" =
	// all tenants), in one consistent read.
	QueueStats(ctx context.Context, p *QueueStatsParams) ([]*QueueStat, error)
	// JobDurations returns the times of up to PerQueue completed jobs per
	// queue (Tenant "" = all tenants) that finished at or after Since and
	// ran a handler (not completed from the cache), newest first within a
	// queue, in one query whatever the number of queues.
	JobDurations(ctx context.Context, p *JobDurationsParams) ([]*JobDuration, error)
	// JobKindStats summarises, per kind, every job of Tenant ("" = all
	// tenants) created at or after Since, in one aggregate query, sorted by
	// kind. It reads the jobs finished since Since (minus KindStatsSkew of
	// clock skew between the nodes that created and finished a job) and the
	// unfinished jobs through their partial indexes, never the whole history.
	JobKindStats(ctx context.Context, p *JobKindStatsParams) ([]*JobKindStat, error)
}

// Records is the part of the Store that keeps idempotency records outside job
// creation: the execution lease and the result cache, for jobs and for Do.
type Records interface {
	// RecordGet returns the record (Tenant, Key) if it is live at Now
	// (ExpiresAt nil or > Now); ErrNotFound otherwise. The record it
	// returns always has an ExpiresAt: one that has none stored (its job,
	// with a dedup window of 0, is unfinished) gets a projection — the
	// job's earliest finish (Now, its RunAt or the end of its lease,
	// whichever is latest) plus its ResultTTL, or for a record without a
	// job the end of its lease (or Now). The projection moves with the job;
	// such a record is never deleted before its job finishes. A record in
	// progress that stores no lease while the job it names runs reads as
	// leased by that job (JobOwner) until its job lease ends. A completed
	// record past its ResultExpiresAt (a result TTL shorter than the dedup
	// window: the record lives on until ExpiresAt) reads without its
	// result: Result nil, SizeBytes 0, Compressed false; its status,
	// CompletedAt, ResultJobID and ResultHash stay.
	RecordGet(ctx context.Context, p *RecordGetParams) (*idemtype.Record, error)

	// RecordDelete deletes the record (Tenant, Key) so the key may be used
	// again; ErrNotFound when there is none. A record whose lease is live at
	// Now, as an acquirer of another owner reads it — a stored lease that
	// has not ended, or, for a record in progress that stores none, the live
	// job lease of the running job it names — is not deleted:
	// ErrKeyInProgress (a new job or acquirer of the key would otherwise run
	// beside the holder). The record of an unfinished job that does not run
	// is deleted: that job, when claimed, acquires the key like any other.
	RecordDelete(ctx context.Context, p *RecordDeleteParams) error

	// RecordAcquire tries to take the execution lease of a key.
	//   - No live record: one is created (in_progress, DedupUntil and
	//     ExpiresAt from the params, JobID from the params) with the lease:
	//     Acquired.
	//   - Completed live record whose result lives (ResultExpiresAt > Now):
	//     not acquired; Record holds the cached result.
	//   - Completed live record whose result expired: the lease is taken
	//     (Acquired) and the record is in progress again without a result,
	//     created at Now; its Fingerprint, JobID, DedupUntil and ExpiresAt
	//     stay (the key still dedups job creation until its window ends).
	//   - In progress, naming job JobID, storing no lease, and that job is
	//     running under a live job lease: Acquired without a write — the job
	//     row is the lease (Record shows Owner and the job's lease end).
	//   - In progress, storing no lease, and the job it names (another than
	//     JobID) is running under a live job lease: that job holds it (a
	//     derived lease, read the same way by RecordGet): not acquired.
	//   - In progress and the lease is free, expired (LeaseUntil <= Now) or
	//     already Owner's: the lease is taken: Acquired.
	//   - Otherwise: not acquired; Record shows the holder and LeaseUntil.
	// A lease taken keeps its record live until LeaseUntil at least: a
	// stored ExpiresAt earlier than LeaseUntil becomes LeaseUntil, so a
	// result TTL shorter than the work never frees a held key — for a
	// lease without a job (JobID 0: Do, result leases, the middleware) as
	// for a job's stored lease (its heartbeats then move both: no new job
	// of the key, acquirer or expiry sweep takes the key from a job that
	// runs under a live lease).
	RecordAcquire(ctx context.Context, p *RecordAcquireParams) (*RecordAcquireResult, error)

	// RecordAcquireMany is RecordAcquire for many keys in one transaction,
	// with one result per item in order. Items are decided in order: of two
	// items with one key and different owners, the first may acquire and the
	// second then sees the key held.
	RecordAcquireMany(ctx context.Context, ps []*RecordAcquireParams) ([]*RecordAcquireResult, error)

	// RecordComplete stores a result on a record whose lease Owner holds
	// — in progress, live at Now and storing Owner's lease, as for
	// RecordRenew — (ErrLeaseLost otherwise, writing nothing: a record
	// that expired is not held even when nobody took it over): status
	// completed, the result fields,
	// CompletedAt = Now, ResultExpiresAt = Now + TTL, ExpiresAt =
	// max(DedupUntil, Now + TTL), lease cleared.
	RecordComplete(ctx context.Context, p *RecordCompleteParams) error

	// RecordRelease clears the execution lease of (Tenant, Key) if Owner
	// holds it (no error otherwise) — with JobLease set, only while job
	// JobLease.ID does not run under another lease token (the key is then
	// that later run's). Failures are never cached: the status
	// stays in_progress. With Forget the record, in progress, of no job
	// and held by Owner, is deleted instead.
	RecordRelease(ctx context.Context, p *RecordReleaseParams) error

	// RecordRenew moves the end of the execution lease of (Tenant, Key) to
	// LeaseUntil if Owner still holds it: the record is in progress, live
	// at Now and stores Owner's lease (lapsed or not, as long as no other
	// owner took it); a stored ExpiresAt earlier than LeaseUntil becomes
	// LeaseUntil (the record lives while its lease does). A lease
	// released, completed, taken over, or on an expired or missing record
	// is ErrLeaseLost and nothing is written: unlike RecordAcquire, a
	// renewal never takes a free key.
	RecordRenew(ctx context.Context, p *RecordRenewParams) error

	// RecordStats summarises the records live and expired at Now (Tenant
	// "" = all tenants).
	RecordStats(ctx context.Context, p *RecordStatsParams) (*RecordStats, error)
}

// Maintenance is the part of the Store the background services use.
type Maintenance interface {
	// JobRescue finds running jobs whose lease expired before Now (up to
	// Limit) and makes them retryable — or dead when Attempt >=
	// MaxAttempts — with RunAt = Now either way and LastError saying the
	// lease was lost; the attempt record gets outcome lost; record leases
	// they held are released; dead ones cancel their dependants. It returns
	// them as the rescue left them (RescuedJob, from its own write).
	// "Expired before Now" is by the store's expiry clock: on PostgreSQL
	// the database's now(), not Now (see LeaderAttempt). It also ends, up
	// to Limit, the holds of cancelled jobs (JobCancel) whose lease expired
	// by that clock; those are not returned and stay cancelled, and their
	// dependants inserted with DependsOnFinished are released as a
	// completion would release them.
	JobRescue(ctx context.Context, p *JobRescueParams) ([]RescuedJob, error)

	// JobDependantsRepair repairs pending jobs whose release was missed
	// (a node of an older version ending a hold without releasing the
	// dependants that wait for any outcome, or any bug of a release path):
	// it examines up to Limit pending jobs created before CreatedBefore,
	// after the cursor After in (created at, id) order, and applies what
	// the finish of their last dependency would have: a job whose
	// dependencies are all satisfied — all completed, or for one inserted
	// with DependsOnFinished all finished, a cancelled one only once its
	// hold ended — is released (scheduled when its RunAt is later than
	// Now, available otherwise); a job that needs its dependencies to
	// complete and has a dead or cancelled one is cancelled at Now with
	// LastError "dependency <id> is <state>" (the smallest such id), with
	// the effects of such a cancel (its record settled, its own pending
	// dependants cancelled or released). A job with an unfinished
	// dependency, or a cancelled one still holding its lease, is left
	// pending. Concurrent finishes and repairs release or cancel each job
	// once. The released queues are announced as a finish's are.
	JobDependantsRepair(ctx context.Context, p *JobDependantsRepairParams) (*JobDependantsRepairResult, error)

	// JobReleaseMany gives running jobs back (graceful shutdown): state
	// available, RunAt = Now, Attempt decremented, lease cleared, attempt
	// outcome released, record leases released, for each of Leases whose
	// token still matches, and for each job running under ClaimToken; the
	// others are skipped. It returns how many were released.
	JobReleaseMany(ctx context.Context, p *JobReleaseManyParams) (int, error)

	// JobPromote moves scheduled and retryable jobs whose RunAt <= Now to
	// available, up to Limit (BatchLimit), and returns the queues that got
	// jobs, so their workers can be woken.
	JobPromote(ctx context.Context, p *JobPromoteParams) ([]string, error)

	// JobDeleteFinished deletes, up to Limit, completed jobs finished
	// before CompletedBefore, cancelled before CancelledBefore and dead
	// before DeadBefore (a zero time keeps that state), with their
	// attempts — except jobs an idempotency record still points to while
	// its dedup window is open, and cancelled jobs that still hold their
	// FIFO partition (JobCancel). It returns how many it deleted.
	JobDeleteFinished(ctx context.Context, p *JobDeleteFinishedParams) (int, error)

	// EventDeleteBefore deletes, up to Limit, events of the event log
	// created before Before, and returns how many (topic retention).
	EventDeleteBefore(ctx context.Context, p *EventDeleteBeforeParams) (int, error)

	// RecordDeleteExpired deletes up to Limit (BatchLimit) records with
	// ExpiresAt <= Now, and drops the result bytes of up to Limit live
	// records whose ResultExpiresAt <= Now (their rows stay until their
	// dedup window ends); it returns how many records it deleted or
	// emptied. Live records and records without ExpiresAt are kept.
	RecordDeleteExpired(ctx context.Context, p *RecordDeleteExpiredParams) (int, error)
}

// Leader elects one node for the background services that must run once.
type Leader interface {
	// LeaderAttempt makes Owner the leader of Name until Now+TTL if there is
	// no leader, the leader's term expired, or Owner already leads (then the
	// term is extended). It reports whether Owner leads.
	// Whether a term expired is decided by the store's expiry clock: the
	// caller's Now on SQLite, the database's clock on PostgreSQL (then the
	// term ends at the database's now() plus TTL; docs/postgres.md,
	// "Clocks"), likewise for JobRescue and JobHeartbeatMany.
	LeaderAttempt(ctx context.Context, p *LeaderParams) (bool, error)
	// LeaderResign ends Owner's term if it leads Name, so another node can
	// lead at once; no error when Owner does not lead.
	LeaderResign(ctx context.Context, p *LeaderResignParams) error
}

// APIKeys stores the API keys of the HTTP server, by hash only.
type APIKeys interface {
	// APIKeyCreate stores a key; the id must be unique (ErrInvalid otherwise).
	APIKeyCreate(ctx context.Context, k *APIKey) error
	// APIKeyByHash returns the unrevoked key whose secret hashes to Hash;
	// ErrNotFound when there is none or it is revoked.
	APIKeyByHash(ctx context.Context, p *APIKeyByHashParams) (*APIKey, error)
	// APIKeyList lists keys, revoked included, oldest first.
	APIKeyList(ctx context.Context) ([]*APIKey, error)
	// APIKeyRevoke revokes the key ID at Now: APIKeyByHash no longer
	// returns it, APIKeyList still does; ErrNotFound when there is no such
	// key.
	APIKeyRevoke(ctx context.Context, p *APIKeyRevokeParams) error
}

// JobInsertParams is one job to insert. The runtime validates and fills in
// defaults before a store sees it: Tenant, Queue, Kind are not empty, Args is
// valid JSON, MaxAttempts >= 1, RunAt is set.
type JobInsertParams struct {
	Tenant       string
	Queue        string
	Kind         string
	Args         json.RawMessage
	Priority     int
	MaxAttempts  int
	RunAt        time.Time
	PartitionKey string
	DependsOn    []int64
	// DependsOnFinished makes the job wait until every DependsOn job has
	// finished, whatever the outcome: completed, dead and cancelled all
	// count, and a dead or cancelled dependency does not cancel it. false =
	// every dependency must complete (a dead or cancelled one cancels it).
	DependsOnFinished bool
	Metadata          json.RawMessage
	// RetryPolicy is stored as given and returned in JobRow.RetryPolicy.
	RetryPolicy json.RawMessage
	// Timeout is stored (microsecond precision) and returned in
	// JobRow.Timeout; 0 = none of its own.
	Timeout time.Duration
	// IdempotencyKey, when not "", deduplicates creation and keys the result cache.
	IdempotencyKey string
	// Fingerprint is the hex SHA-256 of the canonical request; a repeat of
	// the key with another fingerprint is a KeyReusedError.
	Fingerprint string
	// DedupWindow: how long the key blocks creating another job; 0 = until
	// this job is finished.
	DedupWindow time.Duration
	// ResultTTL: how long a completed result is kept for later jobs of the key.
	ResultTTL time.Duration
}

// JobInsertManyParams is a batch of jobs inserted in one transaction.
type JobInsertManyParams struct {
	Jobs []*JobInsertParams
	Now  time.Time
}

// JobInsertResult is the outcome of one inserted item.
type JobInsertResult struct {
	Job      *idemtype.JobRow // the new or existing job; nil when Err is set
	Existing bool             // the key was in its dedup window: no job created
	Err      error            // this item failed; the rest of the batch stands
}

// JobFilter selects jobs for lists, replays and bulk retries.
type JobFilter struct {
	Tenant         string // "" = every tenant
	States         []idemtype.JobState
	Queue          string
	Kind           string
	PartitionKey   string
	IdempotencyKey string
	Since          time.Time // created at or after; zero = no bound
	Until          time.Time // created before; zero = no bound
	// FinishedSince selects jobs finished (completed, dead or cancelled)
	// at or after it; zero = no bound. Unfinished jobs never match.
	FinishedSince time.Time
	ErrorCode     string // the latest failure's code; "" = any
	BatchID       int64  // only the jobs of this batch; 0 = any
	// Resolved selects resolved (true) or unresolved (false) jobs; nil =
	// both. Only dead jobs are ever resolved.
	Resolved *bool
}

// JobListParams selects one page of jobs.
type JobListParams struct {
	Filter JobFilter
	Limit  int   // 1..500
	Cursor int64 // only ids below this; 0 = from the newest
}

// JobClaimParams describes one claim.
type JobClaimParams struct {
	Tenant     string   // "" = any tenant
	Queues     []string // at least one
	Kinds      []string // nil = any kind
	WorkerID   string
	Limit      int
	LeaseUntil time.Time
	Now        time.Time
	// LeaseToken, when not "", is the lease token of every job the claim
	// takes (NewToken: random, never used for another claim); "" gives
	// each job a fresh random one. A caller that names it can give the
	// claim's jobs back (JobReleaseManyParams.ClaimToken) when the claim
	// fails without saying whether it committed.
	LeaseToken string
	// Report, when not nil, is filled with what limits did to the claim.
	Report *ClaimReport
}

// Lease identifies a running job and the token of the claim that holds it.
type Lease struct {
	ID    int64
	Token string
}

// JobHeartbeatParams extends leases.
type JobHeartbeatParams struct {
	// Leases are the leases to extend (job and token), each independently.
	Leases []Lease
	// Until is the new lease end, as the caller's clock reads it: a store
	// whose expiry clock is another (pgstore's database clock) stores its
	// own now plus Until - Now, unless Absolute.
	Until time.Time
	// Now is the caller's now: a lease that has ended by the store's
	// expiry clock (Now, unless the store keeps its own) is not extended.
	Now time.Time
	// Absolute stores Until itself (truncated to microseconds) whatever
	// the store's expiry clock: an end that is an instant, not a length
	// from Now (a pull claim's cap at the job's timeout deadline,
	// StartedAt + the timeout, which the claim reports as the lease's
	// end). A store that always stores Until ignores it.
	Absolute bool
	// Ends, when it holds one time per lease, is filled with the lease end
	// stored for each lease extended, when the store may store another
	// than Until truncated to microseconds (pgstore's database clock: its
	// now plus the lease's length); a store that stores Until may leave
	// it. Untouched for a lease not extended.
	Ends []time.Time
}

// JobFinishParams is the end of one attempt.
type JobFinishParams struct {
	ID         int64
	LeaseToken string
	// State is the job's next state: completed, retryable, scheduled
	// (snooze), dead or cancelled.
	State   idemtype.JobState
	Outcome idemtype.Outcome // the attempt's outcome
	Error   string           // the attempt's error (LastError of the job)
	// ErrorCode is the failure's code (the job's ErrorCode) when Error is
	// set; "" = none.
	ErrorCode string
	// Result is the job's result (JSON) when completed.
	Result        json.RawMessage
	WasCached     bool
	OriginalJobID int64
	// RunAt is the next run time for retryable and scheduled.
	RunAt time.Time
	// Snooze: the attempt does not count (Attempt is decremented).
	Snooze     bool
	FinishedAt time.Time
	DurationMS int64
	HTTPStatus int
	Target     string
	// Record fields: the result as stored in the idempotency record.
	RecordResult     []byte
	RecordCompressed bool
	ResultHash       string
	// Panicked: the attempt failed with a panic the executor recovered
	// from the handler. Not stored: it tells observers (idem's
	// EventFinished.Panicked) what the error's text cannot.
	Panicked bool
	// Repeated is set by JobFinishMany (not by the caller): true when the
	// item was accepted as a repeat of a completion or failure already
	// committed (FinishRepeats), so it wrote nothing. Callers that count
	// finished attempts (metrics, observers) skip such items.
	Repeated bool
}

// BatchCreateParams creates a batch with its jobs.
type BatchCreateParams struct {
	Tenant   string
	Key      string
	Metadata []byte // JSON; nil = none
	Jobs     []*JobInsertParams
	// OnFinish, when not nil, is the batch's completion job, inserted after
	// Jobs in one transaction with DependsOn = the jobs the batch created
	// (not a job an item's key dedups onto) and DependsOnFinished (the store
	// sets both), its Metadata merged with {"idem_batch_id": <the batch id>}
	// (BatchFinishMetadata). Not one of the batch's jobs (JobFilter.BatchID
	// does not list it); the batch's OnFinishJobID names it.
	OnFinish *JobInsertParams
	Now      time.Time
}

// BatchMetadataKey is the metadata field of a batch's completion job that
// holds the batch id.
const BatchMetadataKey = "idem_batch_id"

// BatchFinishMetadata returns meta (a JSON object or nil) with
// BatchMetadataKey set to id.
func BatchFinishMetadata(meta json.RawMessage, id int64) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, fmt.Errorf("completion job metadata: %w", err)
		}
	}
	m[BatchMetadataKey] = json.RawMessage(strconv.FormatInt(id, 10))
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("completion job metadata: %w", err)
	}
	return out, nil
}

// OnFinishParams returns the completion job of batch id whose jobs are ids.
func OnFinishParams(p *JobInsertParams, batchID int64, ids []int64) (*JobInsertParams, error) {
	cp := *p
	meta, err := BatchFinishMetadata(p.Metadata, batchID)
	if err != nil {
		return nil, err
	}
	cp.Metadata, cp.DependsOn, cp.DependsOnFinished = meta, append([]int64(nil), ids...), true
	return &cp, nil
}

// BatchCreateResult is the outcome of BatchCreate.
type BatchCreateResult struct {
	Batch    *idemtype.Batch
	Existing bool              // the batch existed: nothing was created
	Jobs     []JobInsertResult // the created jobs in order; nil when Existing
	OnFinish int64             // the created completion job; 0 = none or Existing
}

// BatchGetParams reads one batch.
type BatchGetParams struct {
	Tenant string // "" = any
	ID     int64
}

// JobResolveParams marks a dead job resolved.
type JobResolveParams struct {
	Tenant string // "" = any
	ID     int64
	Note   string
	Now    time.Time
}

// JobCancelParams cancels one job.
type JobCancelParams struct {
	Tenant string // "" = any
	ID     int64
	Reason string // becomes LastError
	Now    time.Time
	// Voided, when not nil, receives the lease the cancel voided: the job's
	// ID and the token of its claim when it was running, else it is left
	// as it was. The runtime uses it to stop that claim's handler even
	// when its claim has not reached the producer yet.
	Voided *Lease
}

// JobRetryManyParams moves finished jobs back to available.
type JobRetryManyParams struct {
	IDs        []int64
	Filter     JobFilter // used when IDs is empty (Filter.Tenant always applies)
	FromStates []idemtype.JobState
	RunAt      time.Time // zero = Now
	Limit      int       // 0 = no limit for IDs; default 1000 for a filter
	Now        time.Time
}

// QueueStat counts the jobs of one queue.
type QueueStat struct {
	Queue  string
	Counts map[idemtype.JobState]int64
	// OldestAvailable is the smallest RunAt among claimable jobs (available,
	// or scheduled/retryable with RunAt <= now); nil when none.
	OldestAvailable *time.Time
	// Completed1m and Failed1m count attempts finished in the last minute
	// with outcome completed/cached and failed/dead/lost.
	Completed1m int64
	Failed1m    int64
	// DeadUnresolved counts the dead jobs not marked resolved (the
	// dead-letter backlog the seeds alert on); Counts[dead] has them all.
	DeadUnresolved int64
}

// RecordAcquireParams tries to take the execution lease of a key.
type RecordAcquireParams struct {
	Tenant     string
	Key        string
	Owner      string // JobOwner(id) for jobs; a random token for Do
	JobID      int64  // 0 for Do
	LeaseUntil time.Time
	// DedupUntil and ExpiresAt are used when a new record is created.
	DedupUntil time.Time
	ExpiresAt  time.Time
	Now        time.Time
}

// RecordAcquireResult is the outcome of RecordAcquire.
type RecordAcquireResult struct {
	Acquired bool
	Record   *idemtype.Record
}

// RecordCompleteParams stores a result outside a job (Do).
type RecordCompleteParams struct {
	Tenant     string
	Key        string
	Owner      string
	Result     []byte
	Compressed bool
	ResultHash string
	TTL        time.Duration
	DurationMS int64
	Now        time.Time
}

// RecordStats summarises idempotency records.
type RecordStats struct {
	Entries    int64 // live records
	InProgress int64 // live records in progress (not failed)
	Completed  int64 // live records holding a live result (ResultExpiresAt > Now)
	// Failed counts live records whose job is dead, cancelled or deleted
	// without a result (they read idemtype.RecordFailed).
	Failed int64
	// Expiring24h counts live records expiring within 24 h: by their
	// result's expiry while they hold a live result, else by ExpiresAt.
	Expiring24h int64
	// Expired counts the entries awaiting cleanup: records past ExpiresAt
	// not yet deleted, and live records whose result expired but whose
	// bytes the sweep (RecordDeleteExpired) has not dropped yet.
	Expired   int64
	SizeBytes int64 // stored bytes of the live results of live records
}

// APIKey is a stored API key (the secret itself is never stored).
type APIKey struct {
	ID        string
	Hash      string // hex SHA-256 of the secret
	Tenant    string
	Admin     bool
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// JobOwner is the execution-lease owner name of a job.
func JobOwner(id int64) string { return "job:" + strconv.FormatInt(id, 10) }

// NewToken returns a random 128-bit hex token (lease tokens, owners).
func NewToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// OrNow returns t, or time.Now() when t is zero, in UTC.
func OrNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t.UTC()
}
