package sqlitestore

// All the SQL of the store except the schema (migrations/*.sql) lives in this
// file. Times are unix microseconds; ?N parameters are numbered where a value
// is used more than once.

import (
	"strconv"
	"strings"
)

const jobCols = `id, tenant, queue, kind, args, state, priority, attempt, max_attempts, run_at,
created_at, started_at, finished_at, partition_key, idempotency_key, depends_on, result,
was_cached, original_job_id, last_error, metadata, lease_token, lease_expires_at, worker_id,
retry_policy, error_code, resolved_at, resolution_note, timeout_us`

// jobColsJ is jobCols of the table alias j.
const jobColsJ = `j.id, j.tenant, j.queue, j.kind, j.args, j.state, j.priority, j.attempt, j.max_attempts,
j.run_at, j.created_at, j.started_at, j.finished_at, j.partition_key, j.idempotency_key, j.depends_on,
j.result, j.was_cached, j.original_job_id, j.last_error, j.metadata, j.lease_token, j.lease_expires_at,
j.worker_id, j.retry_policy, j.error_code, j.resolved_at, j.resolution_note, j.timeout_us`

const recordCols = `tenant, key, status, fingerprint, job_id, result_job_id, result, result_hash,
size_bytes, compressed, lease_owner, lease_until, created_at, completed_at, dedup_until,
expires_at, duration_ms, result_expires_at`

// recordReadCols is recordCols for reads: a record in progress whose job is
// dead or cancelled, or was deleted since (a DLQ delete: only finished
// jobs are deleted, and a completed one's record is completed) while no
// live stored lease holds the record, reads 'failed' (store.RecordFailed).
//
// A record without an expiry (its job, with a dedup window of 0, is
// unfinished) reads with a projected one (store.Records.RecordGet): the
// job's earliest finish — ?3 (now), its run_at or its lease's end,
// whichever is latest — plus its result TTL; a lease record without a job,
// the end of its lease.
//
// The execution lease reads as it is held: a record in progress with no
// lease stored whose job is running is leased by that job until its job
// lease ends (leaseCols; docs/state-machine.md, "Idempotency keys"). Such a
// record past its stored expiry (its window ended while the job ran) is
// live while the job lease is (sqlRunHeld): it reads with the projected
// expiry of a window-0 record.
//
// A cached result past its own expiry (result_expires_at, which may come
// before the record's: a result TTL shorter than the dedup window) reads
// as gone — no result, no size — whether or not the expiry sweep has
// dropped its bytes yet; one stored before migration 0023
// (result_expires_at NULL) expires with its record.
var recordReadCols = `tenant, key, CASE WHEN status = 'in_progress' AND (EXISTS (SELECT 1 FROM jobs fj
    WHERE fj.id = idem_keys.job_id AND fj.state IN ('dead', 'cancelled'))
    OR (job_id <> 0 AND NOT (lease_owner <> '' AND lease_until > ?3)
        AND NOT EXISTS (SELECT 1 FROM jobs fj WHERE fj.id = idem_keys.job_id))) THEN 'failed' ELSE status END,
fingerprint, job_id, result_job_id, CASE WHEN result_expires_at <= ?3 THEN NULL ELSE result END, result_hash,
CASE WHEN result_expires_at <= ?3 THEN 0 ELSE size_bytes END,
CASE WHEN result_expires_at <= ?3 THEN 0 ELSE compressed END, ` + leaseCols + `, created_at, completed_at, dedup_until,
COALESCE(CASE WHEN expires_at IS NULL OR expires_at > ?3 OR NOT ` + sqlRunHeld("idem_keys", "?3") + `
        THEN expires_at END,
    (SELECT max(?3, fj.run_at, COALESCE(fj.lease_expires_at, 0)) + fj.result_ttl_us FROM jobs fj
     WHERE fj.id = idem_keys.job_id),
    max(?3, COALESCE(lease_until, 0))), duration_ms,
COALESCE(result_expires_at, CASE WHEN status = 'completed' THEN expires_at END)`

// leaseCols reads a record's lease_owner and lease_until with the lease its
// job's row implies: a job acquires the record its own insert created
// without writing it (qRecordOwnLease), so while the record stores no lease
// and its job runs, the job holds it until the end of its job lease.
const leaseCols = `CASE WHEN lease_owner = '' AND status = 'in_progress' THEN COALESCE((SELECT 'job:' || lj.id
    FROM jobs lj WHERE lj.id = idem_keys.job_id AND lj.state = 'running'), '') ELSE lease_owner END,
CASE WHEN lease_owner = '' AND status = 'in_progress' THEN (SELECT lj.lease_expires_at
    FROM jobs lj WHERE lj.id = idem_keys.job_id AND lj.state = 'running') ELSE lease_until END`

// recordLeaseCols is recordCols with the lease read as leaseCols.
const recordLeaseCols = `tenant, key, status, fingerprint, job_id, result_job_id, result, result_hash,
size_bytes, compressed, ` + leaseCols + `, created_at, completed_at, dedup_until,
expires_at, duration_ms, result_expires_at`

// sqlDerivedHeld is true for a record whose stored lease is free while the
// running job it names, another than ?3, holds it by its job lease (at
// ?6); an acquire then leaves the record alone.
const sqlDerivedHeld = `(lease_owner = '' AND EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = idem_keys.job_id
    AND lj.id <> ?3 AND lj.state = 'running' AND lj.lease_expires_at > ?6))`

// sqlRunHeld is true for a record (table alias t) in progress that stores
// no lease while the job it names runs under a live job lease at now: that
// job holds the record by its job lease, and the record is live whatever
// its stored expiry (a window that ended while the job ran: the stored
// expiry is the window's end). No acquirer takes it over, no new job of
// the key starts it afresh, the expiry sweep keeps it, and readers show it
// live and held by the job; the job's completion then caches its result
// (qKeyComplete). A job whose lease lapsed no longer holds it.
func sqlRunHeld(t, now string) string {
	return `(` + t + `.status = 'in_progress' AND ` + t + `.lease_owner = '' AND EXISTS (SELECT 1 FROM jobs rj
    WHERE rj.id = ` + t + `.job_id AND rj.state = 'running' AND rj.lease_expires_at > ` + now + `))`
}

// sqlRecordExpired is true for a record (table alias t) expired at now: by
// its stored expiry, unless its running job holds it (sqlRunHeld).
func sqlRecordExpired(t, now string) string {
	return `(` + t + `.expires_at <= ` + now + ` AND NOT ` + sqlRunHeld(t, now) + `)`
}

const attemptCols = `job_id, attempt, started_at, finished_at, duration_ms, outcome, error,
worker_id, target, http_status`

// sqlAvailable is the predicate of jobs_claim_tenant (migration 0031), the
// claims' state: due scheduled and retryable jobs are made available
// first (qClaimPromote). sqlDue is jobs_due's: the jobs waiting for their
// run_at.
func sqlAvailable(t string) string { return stateIn(t, "available") }

func sqlDue(t string) string { return stateIn(t, "scheduled", "retryable") }

// sqlUnfinished and sqlFinished are the unfinished and finished states of
// the jobs of table alias t ("" for none), spelled exactly as in the
// partial indexes so that the planner can use them.
func sqlUnfinished(t string) string {
	return stateIn(t, "pending", "scheduled", "available", "running", "retryable")
}

func sqlFinished(t string) string { return stateIn(t, "completed", "dead", "cancelled") }

// sqlSlotIndexed is the predicate of jobs_running (migration 0030),
// spelt as there so that SQLite proves the index usable: the jobs that
// take a slot of the concurrency limits of their scope, or may until a
// lease ends (sqlSlotTaken): a running one; a cancelled one that still
// holds its FIFO partition (its handler may still run: qJobCancel); a
// holding one retried (qJobRetry), which waits to run again with the end
// of its old lease kept. No other job keeps a lease end.
const sqlSlotIndexed = `(state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL)
    OR ((state = 'pending' OR state = 'scheduled' OR state = 'available') AND lease_expires_at IS NOT NULL))`

// sqlSlotTaken is true at now (an SQL expression, µs) for a job that takes
// a slot of the concurrency limits of its scope: a running one, or a
// cancelled one that still holds its FIFO partition (its handler may
// still run: qJobCancel), until the hold ends as the head rule's does
// (sqlPartitionTaken), or a holding job retried (qJobRetry) until its old
// lease ends: its old handler may still run until then, and its own next
// run starts no earlier (sqlRetryRunAt), so it never waits for its own
// slot. Every count of running jobs for a limit uses it (the claim's and
// LimitList's). Its first term is jobs_running's predicate (migration
// 0030), so that SQLite proves the index usable (a term of the WHERE
// must match the predicate, or one arm of it; the outer parentheses make
// no node, and the WHERE is split at the AND as without them); the second
// drops the retried jobs whose old lease ended.
func sqlSlotTaken(now string) string {
	return `(` + sqlSlotIndexed + ` AND (state = 'running' OR state = 'cancelled' OR lease_expires_at > ` + now + `))`
}

// stateIn is the condition "the state of table alias t is one of states",
// spelt as a chain of ORs, not as an IN list: SQLite evaluates a partial
// index's predicate for every row written, and an IN list of three or more
// constants there builds a temporary B-tree each time (0027).
func stateIn(t string, states ...string) string {
	col := "state"
	if t != "" {
		col = t + ".state"
	}
	terms := make([]string, len(states))
	for i, st := range states {
		terms[i] = col + " = '" + st + "'"
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}

// Migrations.
const (
	qMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
)`
	qMigrationApplied = `SELECT count(*) FROM schema_migrations WHERE version = ?`
	qMigrationInsert  = `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`
)

// Job inserts.
const (
	// qJobSeq is the last job id ever allocated.
	qJobSeq = `SELECT max(COALESCE((SELECT max(id) FROM jobs), 0), (SELECT seq FROM job_seq WHERE id = 1))`
	// qJobSeqRaise records a deleted job's id (or the last id handed to a
	// WriteTx function that rolled back) as the high-water mark.
	qJobSeqRaise = `UPDATE job_seq SET seq = max(seq, ?) WHERE id = 1`

	qJobInsert = `INSERT INTO jobs (id, tenant, queue, kind, args, state, priority, max_attempts,
run_at, created_at, finished_at, partition_key, idempotency_key, depends_on, last_error, metadata,
dedup_window_us, result_ttl_us, retry_policy, timeout_us)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	jobInsertCols       = 20
	qJobInsertMultiHead = `INSERT INTO jobs (id, tenant, queue, kind, args, state, priority, max_attempts,
run_at, created_at, finished_at, partition_key, idempotency_key, depends_on, last_error, metadata,
dedup_window_us, result_ttl_us, retry_policy, timeout_us) VALUES `
	jobInsertRow = `(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

	// Plain jobs (no key, no dependencies) bind only the columns they set.
	qJobInsertPlainHead = `INSERT INTO jobs (id, tenant, queue, kind, args, state, priority, max_attempts,
run_at, created_at, partition_key, metadata, retry_policy, timeout_us) VALUES `
	jobInsertPlainRow  = `(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`
	jobInsertPlainCols = 14

	// qJobInsertSharedHead inserts rows that differ only in id and args
	// (insertSharedRows): the twelve shared values are bound once as ?1…?12
	// and every row refers to them, so a batch binds two values a row
	// instead of fourteen. A row's own two are anonymous: SQLite numbers a
	// bare ? one past the highest so far (13, 14, then 15, 16, …), and only
	// numbered parameters enter the list it scans to name each one at bind.
	qJobInsertSharedHead = `INSERT INTO jobs (tenant, queue, kind, state, priority, max_attempts,
run_at, created_at, partition_key, metadata, retry_policy, timeout_us, id, args) VALUES `
	jobInsertSharedRow  = `(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?,?)`
	jobInsertSharedCols = 12

	qJobDepInsert = `INSERT OR IGNORE INTO job_deps (job_id, depends_on_id) VALUES (?, ?)`
	// qJobDepsAny marks a job that waits for its dependencies' end whatever
	// the outcome.
	qJobDepsAny = `UPDATE jobs SET deps_any = 1 WHERE id = ?`
	// qJobDepState reads a dependency of a new job: its state, its tenant,
	// and whether it is a cancelled job that still holds its lease (its
	// handler may still run: qJobCancel), which a job waiting for any
	// outcome waits for.
	qJobDepState = `SELECT state, tenant, state = 'cancelled' AND lease_expires_at IS NOT NULL FROM jobs WHERE id = ?`

	qKeyGet = `SELECT job_id, fingerprint FROM idem_keys WHERE tenant = ? AND key = ?`

	// qKeyJobGet is the read of a repeated key (Store.existing): the live
	// record's fingerprint, job and dedup window, with its job's row, in
	// one statement (the columns RecordGet and JobGet would read for it).
	// No row when there is no live record or its job is gone.
	qKeyJobGet = `SELECT k.fingerprint, k.job_id, k.dedup_until, ` + jobColsJ + `
FROM idem_keys k JOIN jobs j ON j.id = k.job_id AND j.tenant = k.tenant
WHERE k.tenant = ?1 AND k.key = ?2 AND (k.expires_at IS NULL OR k.expires_at > ?3)`
)

// keyTakeExpired is qKeyTake's test of an expired record.
var keyTakeExpired = sqlRecordExpired("idem_keys", "?5")

// keyTakeDrop is qKeyTake's test of a record whose cached result is not
// kept: the record expired, or its result did (a result TTL shorter than
// the window: the record outlived its result).
var keyTakeDrop = `(` + keyTakeExpired + ` OR (status = 'completed' AND result_expires_at <= ?5))`

// keptResultExpiry is the expiry of the cached result of a completed
// record that a reopen (qKeyTake, ?7 the new job's result TTL) or a
// window-0 close (qKeyFinal, ?5 the job's result TTL) keeps: its own
// stored expiry; for a result stored before migration 0023, which has
// none, the record's (its result expires with it); the job's TTL from
// CompletedAt only when the record has neither (a window-0 record of a
// result stored before 0023).
func keptResultExpiry(ttl string) string {
	return `COALESCE(result_expires_at, expires_at, completed_at + ` + ttl + `)`
}

// qKeyFinal closes a window-0 key when its job reaches a final state; a
// cached result is kept until its own expiry (keptResultExpiry: the
// result a job of the key stored before, kept by this job's insert, has
// that job's TTL, not this one's).
// ?1 finished_at, ?2 tenant, ?3 key, ?4 job id, ?5 result ttl us.
var qKeyFinal = `UPDATE idem_keys SET dedup_until = ?1,
    expires_at = max(COALESCE(expires_at, ?1), ?1,
                     CASE WHEN status = 'completed' THEN COALESCE(` + keptResultExpiry("?5") + `, ?1) ELSE ?1 END)
WHERE tenant = ?2 AND key = ?3 AND job_id = ?4 AND dedup_until IS NULL`

var (
	// qKeyTake creates the record of a new job's key, or takes it over when
	// it expired (reset: treated as absent), its dedup window passed (the
	// cached result stays while it lives: a result past its own expiry is
	// dropped), or the job it points to no longer exists. When
	// the window is open nothing changes and no row is returned.
	//
	// ExpiresAt: NULL for a window of 0 (it blocks until the job finishes);
	// otherwise DedupUntil, or for a kept result max(DedupUntil, the
	// result's expiry). A kept result keeps its own expiry (keptResultExpiry):
	// the new job's ResultTTL is for the result it may store, not for one
	// stored before it (before, the kept result was rebased on it, so a
	// shorter TTL dropped a live result and a longer one served a result
	// past its expiry).
	// A record held by the running job it names (sqlRunHeld) is not
	// expired, whatever its stored expiry: when its window passed, the new
	// job takes it over with that job's lease written into it, so the new
	// job waits behind it (docs/state-machine.md, "Idempotency keys"); the
	// record then expires no earlier than that lease ends (heartbeats move
	// both: qKeyLeaseExtend), so it outlives the new job's window while the
	// running job holds it.
	// ?1 tenant, ?2 key, ?3 fingerprint, ?4 job id, ?5 now, ?6 dedup_until,
	// ?7 result ttl us.
	qKeyTake = `INSERT INTO idem_keys (tenant, key, status, fingerprint, job_id, created_at, dedup_until, expires_at)
VALUES (?1, ?2, 'in_progress', ?3, ?4, ?5, ?6, ?6)
ON CONFLICT (tenant, key) DO UPDATE SET
    fingerprint   = excluded.fingerprint,
    job_id        = excluded.job_id,
    dedup_until   = excluded.dedup_until,
    status        = CASE WHEN ` + keyTakeDrop + ` THEN 'in_progress' ELSE status END,
    result_job_id = CASE WHEN ` + keyTakeDrop + ` THEN 0 ELSE result_job_id END,
    result        = CASE WHEN ` + keyTakeDrop + ` THEN NULL ELSE result END,
    result_hash   = CASE WHEN ` + keyTakeDrop + ` THEN '' ELSE result_hash END,
    size_bytes    = CASE WHEN ` + keyTakeDrop + ` THEN 0 ELSE size_bytes END,
    compressed    = CASE WHEN ` + keyTakeDrop + ` THEN 0 ELSE compressed END,
    lease_owner   = CASE WHEN ` + keyTakeExpired + ` THEN ''
                         WHEN lease_owner = '' AND status = 'in_progress' THEN COALESCE((SELECT 'job:' || lj.id
                             FROM jobs lj WHERE lj.id = idem_keys.job_id AND lj.state = 'running'), '')
                         ELSE lease_owner END,
    lease_until   = CASE WHEN ` + keyTakeExpired + ` THEN NULL
                         WHEN lease_owner = '' AND status = 'in_progress' THEN (SELECT lj.lease_expires_at
                             FROM jobs lj WHERE lj.id = idem_keys.job_id AND lj.state = 'running')
                         ELSE lease_until END,
    created_at    = CASE WHEN ` + keyTakeExpired + ` THEN ?5 ELSE created_at END,
    completed_at  = CASE WHEN ` + keyTakeDrop + ` THEN NULL ELSE completed_at END,
    duration_ms   = CASE WHEN ` + keyTakeDrop + ` THEN 0 ELSE duration_ms END,
    result_expires_at = CASE WHEN status = 'completed' AND NOT ` + keyTakeDrop + ` THEN ` + keptResultExpiry("?7") + ` END,
    expires_at    = CASE WHEN ?6 IS NULL THEN NULL
                         WHEN status = 'completed' AND NOT ` + keyTakeDrop + `
                         THEN max(?6, ` + keptResultExpiry("?7") + `)
                         WHEN ` + keyTakeDrop + ` OR status <> 'in_progress' THEN ?6
                         ELSE max(?6, COALESCE(CASE WHEN lease_owner = '' THEN (SELECT lj.lease_expires_at
                             FROM jobs lj WHERE lj.id = idem_keys.job_id AND lj.state = 'running')
                             WHEN lease_owner LIKE 'job:%' THEN lease_until END, ?6)) END
WHERE ` + keyTakeExpired + `
   OR dedup_until <= ?5
   OR NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = idem_keys.job_id)`
)

// Job reads.
const (
	qJobGet       = `SELECT ` + jobCols + ` FROM jobs WHERE id = ?`
	qJobGetTenant = `SELECT ` + jobCols + ` FROM jobs WHERE id = ? AND tenant = ?`
	// qAttemptList lists the ended attempts of job ?1 and, when the job is
	// running, its current attempt, which is not stored as a row until it
	// ends: it is read from the job row. One statement, one snapshot.
	// A completion is not stored as a row either (docs/state-machine.md, "Attempts"):
	// it is the completed job row itself, unless a row for it exists
	// (deliveries, and completions stored before the job row kept them).
	qAttemptList = `SELECT ` + attemptCols + ` FROM (
    SELECT 0 AS k, id AS o, ` + attemptCols + ` FROM attempts WHERE job_id = ?1
    UNION ALL
    SELECT 1, 0, id, attempt, started_at, NULL, 0, 'running', '', worker_id, '', 0
    FROM jobs WHERE id = ?1 AND state = 'running'
    UNION ALL
    SELECT 1, 0, id, attempt, started_at, finished_at, duration_ms,
        CASE WHEN was_cached THEN 'cached' ELSE 'completed' END, '', worker_id, '', 0
    FROM jobs WHERE id = ?1 AND state = 'completed' AND started_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = ?1 AND a.outcome IN ('completed', 'cached')))
ORDER BY k, o`
	qJobExists = `SELECT count(*) FROM jobs WHERE id = ? AND (?2 = '' OR tenant = ?2)`

	qStatsCounts = `SELECT queue, state, count(*), COALESCE(sum(resolved_at IS NULL), 0) FROM jobs
WHERE (?1 = '' OR tenant = ?1) GROUP BY queue, state`
	// qStats1m counts the last minute's completions from the completed
	// job rows (a completion is not an attempt row) and its failures from
	// the attempt rows.
	qStats1m = `SELECT queue, sum(c), sum(f) FROM (
    SELECT queue, 1 AS c, 0 AS f FROM jobs
    WHERE state = 'completed' AND finished_at > ?2 AND (?1 = '' OR tenant = ?1)
    UNION ALL
    SELECT j.queue, 0, 1
    FROM attempts a JOIN jobs j ON j.id = a.job_id
    WHERE a.finished_at IS NOT NULL AND a.finished_at > ?2 AND a.outcome IN ('failed', 'dead', 'lost')
        AND (?1 = '' OR j.tenant = ?1))
GROUP BY queue`
)

// Claims, heartbeats and finishes.
const (

	// sqlRetryDepState is what the dependencies of job jobs.id make of it
	// (qJobRetry): 'cancelled' when one is dead or cancelled and the job
	// does not wait for any outcome, 'pending' when one is unfinished or a
	// cancelled one still holds its lease (its handler may still run), NULL
	// otherwise (none, or all satisfied).
	sqlRetryDepState = `(SELECT CASE
        WHEN jobs.deps_any = 0 AND max(p.state IN ('dead', 'cancelled')) = 1 THEN 'cancelled'
        WHEN max(p.state NOT IN ('completed', 'dead', 'cancelled')
            OR (p.state = 'cancelled' AND p.lease_expires_at IS NOT NULL)) = 1 THEN 'pending' END
    FROM job_deps d JOIN jobs p ON p.id = d.depends_on_id WHERE d.job_id = jobs.id)`

	// sqlRetryMissingDep is the smallest dependency of job jobs.id that no
	// longer exists when the job never started (attempt 0, no attempt
	// stored) and waits for its dependencies to complete; NULL otherwise.
	// JobRetryMany refuses such a job (store.RetryRefusal).
	sqlRetryMissingDep = `(SELECT min(d.depends_on_id) FROM job_deps d
    WHERE d.job_id = jobs.id AND jobs.deps_any = 0 AND jobs.attempt = 0
      AND NOT EXISTS (SELECT 1 FROM jobs p WHERE p.id = d.depends_on_id)
      AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = jobs.id))`

	// qHasDependants lists which of the jobs in the JSON array ?1 have
	// dependants (so finishes skip the release/cancel query for the rest).
	qHasDependants = `SELECT DISTINCT depends_on_id FROM job_deps
WHERE depends_on_id IN (SELECT value FROM json_each(?1))`
	// qAnyDependants tells whether any job waits for another: when none
	// does, finishes skip qHasDependants (it reads the id list with
	// json_each even on an empty table).
	qAnyDependants = `SELECT EXISTS (SELECT 1 FROM job_deps)`

	qHeartbeat = `UPDATE jobs SET lease_expires_at = ?1
WHERE id = ?2 AND state = 'running' AND lease_token = ?3 AND lease_expires_at > ?4
RETURNING tenant, idempotency_key`
	// qKeyLeaseExtend moves a job's stored lease on its key's record (a
	// record a later job of the key reopened while this job ran: qKeyTake)
	// and keeps the record in progress live while the lease is.
	qKeyLeaseExtend = `UPDATE idem_keys SET lease_until = ?1,
    expires_at = CASE WHEN status = 'in_progress' AND expires_at IS NOT NULL THEN max(expires_at, ?1) ELSE expires_at END
WHERE tenant = ?2 AND key = ?3 AND lease_owner = ?4`

	// qJobFinish ends the attempt of a running job.
	// ?1 state, ?2 finished_at (NULL unless final), ?3 error, ?4 result,
	// ?5 was_cached, ?6 original_job_id, ?7 run_at (NULL = keep),
	// ?8 snooze (1 = attempt does not count), ?9 id, ?10 token, ?11 error
	// code.
	qJobFinish = `UPDATE jobs SET
    state            = ?1,
    finished_at      = ?2,
    last_error       = CASE WHEN ?3 <> '' THEN ?3 ELSE last_error END,
    error_code       = CASE WHEN ?3 <> '' THEN ?11 ELSE error_code END,
    result           = CASE WHEN ?1 = 'completed' THEN ?4 ELSE result END,
    was_cached       = ?5,
    original_job_id  = ?6,
    run_at           = COALESCE(?7, run_at),
    attempt          = attempt - ?8,
    duration_ms      = CASE WHEN ?1 = 'completed' THEN ?12 ELSE duration_ms END,
    lease_expires_at = NULL
WHERE id = ?9 AND state = 'running' AND lease_token = ?10
RETURNING tenant, idempotency_key, dedup_window_us, result_ttl_us`

	// qAttemptInsertFinish writes the ended attempt of job ?1 while it still
	// runs under token ?2 (run before qJobFinish, which changes the row).
	// ?3 finished_at, ?4 duration ms, ?5 outcome, ?6 error, ?7 target,
	// ?8 http status.
	qAttemptInsertFinish = `INSERT INTO attempts (job_id, attempt, started_at, finished_at, duration_ms,
    outcome, error, worker_id, target, http_status)
SELECT id, attempt, started_at, ?3, ?4, ?5, ?6, worker_id, ?7, ?8 FROM jobs
WHERE id = ?1 AND state = 'running' AND lease_token = ?2
    AND NOT (?5 IN ('completed', 'cached') AND ?7 = '')`

	// qJobFinishedCheck reads job ?1 and its latest attempt row for a
	// finish that matched no running lease (store.FinishSeen).
	qJobFinishedCheck = `SELECT j.state, j.lease_token, j.result, j.last_error, j.error_code, j.attempt,
    coalesce(a.attempt, 0), coalesce(a.outcome, ''), coalesce(a.error, '')
FROM jobs j LEFT JOIN attempts a ON a.id = (SELECT max(id) FROM attempts WHERE job_id = j.id)
WHERE j.id = ?1`

	// qDependantsRelease makes pending dependants of job ?2 whose
	// dependencies are all satisfied available (scheduled when their run_at
	// is later): all completed, or — for a job that waits for any outcome
	// (deps_any) — all finished, a cancelled one only once its hold ended
	// (its handler may still run until then: qJobCancel; the end of the
	// hold releases them, qCancelAck and qCancelHoldEnd). ?3 = 1 releases
	// only deps_any dependants (job ?2 died, was cancelled or its hold
	// ended).
	qDependantsRelease = `UPDATE jobs SET state = ` + sqlReleasedState + `
WHERE state = 'pending' AND (?3 = 0 OR deps_any = 1)
  AND id IN (SELECT job_id FROM job_deps WHERE depends_on_id = ?2)
  AND ` + sqlDepsSatisfied
	// qDependantsReleaseQueues is qDependantsRelease returning the queues
	// and states of the jobs it released (the end of a hold announces
	// the queues of those made available: Store.announce).
	qDependantsReleaseQueues = qDependantsRelease + `
RETURNING queue, state`

	// sqlReleasedState is the state a released pending job gets as of ?1:
	// scheduled when its run_at is later, available otherwise.
	sqlReleasedState = `CASE WHEN run_at > ?1 THEN 'scheduled' ELSE 'available' END`
	// sqlDepsSatisfied holds when the dependencies of pending job jobs.id
	// let it run: all completed, or — for a job that waits for any outcome
	// (deps_any) — all finished, a cancelled one only once its hold ended.
	sqlDepsSatisfied = `NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs p ON p.id = d.depends_on_id
                  WHERE d.job_id = jobs.id AND p.state <> 'completed'
                    AND (jobs.deps_any = 0 OR p.state NOT IN ('dead', 'cancelled')
                         OR (p.state = 'cancelled' AND p.lease_expires_at IS NOT NULL)))`

	// qDependantsCancel cancels the pending dependants of a job (not those
	// that wait for any outcome: deps_any).
	qDependantsCancel = `UPDATE jobs SET state = 'cancelled', finished_at = ?1, last_error = ?2
WHERE state = 'pending' AND deps_any = 0 AND id IN (SELECT job_id FROM job_deps WHERE depends_on_id = ?3)
RETURNING id, tenant, idempotency_key, dedup_window_us, result_ttl_us`

	// qKeyFinalWindow gives a record of a finished job (window > 0) an
	// expiry when it has none, so it does not live forever. It takes the
	// same parameters as qKeyFinal (?5 is not needed).
	qKeyFinalWindow = `UPDATE idem_keys SET expires_at = max(COALESCE(dedup_until, ?1), ?1)
WHERE tenant = ?2 AND key = ?3 AND job_id = ?4 AND expires_at IS NULL AND ?5 = ?5`

	// qKeyComplete stores a job's result in its record, releases the job's
	// lease on it and closes a window-0 key's window at the finish (what
	// qKeyFinal does for the other final states).
	// ?1 result, ?2 hash, ?3 compressed, ?4 job id, ?5 finished_at,
	// ?6 ttl us, ?7 duration ms, ?8 tenant, ?9 key, ?10 lease owner,
	// ?11 the job's dedup window us.
	qKeyComplete = `UPDATE idem_keys SET
    status        = 'completed',
    dedup_until   = CASE WHEN ?11 = 0 AND job_id = ?4 AND dedup_until IS NULL THEN ?5 ELSE dedup_until END,
    result        = ?1,
    result_hash   = ?2,
    size_bytes    = length(?1),
    compressed    = ?3,
    result_job_id = ?4,
    completed_at  = ?5,
    result_expires_at = ?5 + ?6,
    expires_at    = max(COALESCE(dedup_until, ?5), ?5 + ?6),
    duration_ms   = ?7,
    lease_owner   = CASE WHEN lease_owner = ?10 THEN '' ELSE lease_owner END,
    lease_until   = CASE WHEN lease_owner = ?10 THEN NULL ELSE lease_until END
WHERE tenant = ?8 AND key = ?9`

	qKeyLeaseRelease = `UPDATE idem_keys SET lease_owner = '', lease_until = NULL
WHERE tenant = ?1 AND key = ?2 AND lease_owner = ?3`
	// qKeyLeaseForget deletes the in-progress record of no job whose
	// lease ?3 holds (store.RecordReleaseParams.Forget).
	qKeyLeaseForget = `DELETE FROM idem_keys
WHERE tenant = ?1 AND key = ?2 AND lease_owner = ?3 AND status = 'in_progress' AND job_id = 0`
	// qKeyLeaseReleaseRun is qKeyLeaseRelease for the give-back of job
	// ?4's run under lease token ?5 (store.RecordReleaseParams.JobLease):
	// nothing is released while the job runs under another token, a later
	// run holding the key under the same owner name.
	qKeyLeaseReleaseRun = `UPDATE idem_keys SET lease_owner = '', lease_until = NULL
WHERE tenant = ?1 AND key = ?2 AND lease_owner = ?3
  AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = ?4 AND state = 'running' AND lease_token <> ?5)`

	// qKeyLeaseRenew moves the lease end (?4) of a record whose lease owner
	// ?3 still holds: in progress, live at ?5, storing that owner's lease
	// (store.Records.RecordRenew); the record lives until the new end at
	// least.
	qKeyLeaseRenew = `UPDATE idem_keys SET lease_until = ?4,
    expires_at = CASE WHEN expires_at < ?4 THEN ?4 ELSE expires_at END
WHERE tenant = ?1 AND key = ?2 AND lease_owner = ?3 AND status = 'in_progress'
  AND (expires_at IS NULL OR expires_at > ?5)`

	qJobKeyTimes  = `SELECT dedup_window_us, result_ttl_us FROM jobs WHERE id = ?`
	qJobCancelGet = `SELECT ` + jobCols + ` FROM jobs WHERE id = ?1 AND (?2 = '' OR tenant = ?2)`
	// qJobCancel cancels job ?3. A running job keeps its lease end (the
	// hold, migration 0026): its handler may still run, so it keeps its
	// slot under the concurrency limits of its scope (sqlSlotTaken), and a
	// job of a FIFO partition its partition (sqlPartitionTaken), until its
	// process acknowledges the cancel (qCancelAck) or the rescuer ends the
	// hold once the lease ended (qCancelHoldEnd). The lease is not renewed
	// any more (qHeartbeat reads running jobs only), and a cancelled row's
	// lease is not shown (scanJob). A waiting job that still holds the end
	// of a cancelled run's lease (retried while it held: qJobRetry) keeps
	// it too, with that run's token: the old handler's refused finish ends
	// this hold as it ends a first one (qCancelAck).
	qJobCancel = `UPDATE jobs SET state = 'cancelled', finished_at = ?1, last_error = ?2,
    lease_expires_at = CASE WHEN state = 'running' OR lease_expires_at > ?1
        THEN lease_expires_at END
WHERE id = ?3 RETURNING ` + jobCols
	// qCancelAck ends the hold of cancelled job ?1 when ?2 is the lease it
	// holds: its handler returned, its slot and partition move on. It returns the
	// job's queue (to announce) when it ended a hold.
	qCancelAck = `UPDATE jobs SET lease_expires_at = NULL
WHERE id = ?1 AND state = 'cancelled' AND lease_token = ?2 AND lease_expires_at IS NOT NULL
RETURNING queue`
	// qCancelHoldEnd ends the holds whose lease ended before ?1, up to ?2
	// (JobRescue): the jobs stay cancelled. It returns their ids (whose
	// dependants waiting for any outcome are released then) and queues (to
	// announce).
	qCancelHoldEnd = `UPDATE jobs SET lease_expires_at = NULL
WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_running
    WHERE ` + sqlSlotIndexed + ` AND state = 'cancelled' AND lease_expires_at < ?1
    ORDER BY lease_expires_at LIMIT ?2)
RETURNING id, queue`
	// qAttemptEndNow writes the ended attempt of running job ?3 with
	// finished_at ?1, outcome ?4 and error ?2 (cancel, rescue, release); it
	// runs while the row still holds the attempt (state running, ?5 = its
	// lease token, or '' for any).
	qAttemptEndNow = `INSERT INTO attempts (job_id, attempt, started_at, finished_at, duration_ms,
    outcome, error, worker_id)
SELECT id, attempt, started_at, ?1, max(0, (?1 - started_at) / 1000), ?4, ?2, worker_id FROM jobs
WHERE id = ?3 AND state = 'running' AND (?5 = '' OR lease_token = ?5)`

	// qJobRetry reopens job ?3 with run_at ?1 at now ?2, in the state an
	// insert would give it now (store.Jobs.JobInsertMany, "Initial state"):
	// cancelled again when a dependency is dead or cancelled (unless it
	// waits for any outcome: deps_any), pending while a dependency is
	// unfinished, else scheduled or available by run_at. Writes are
	// serialised (one writer), so the dependencies' states read here are
	// those a later finish sees: a pending retried job is released (or
	// cancelled) by its last dependency's finish, as an inserted one.
	//
	// A cancelled job that still holds its lease (its handler may
	// still run: qJobCancel) runs again no earlier than the end of that
	// lease (sqlRetryRunAt), so its new attempt never overlaps the old one;
	// it keeps that lease's end (lease_expires_at, NULL on any other dead
	// or cancelled job) until it is claimed again, so that an earlier job
	// of its partition waiting for it waits until then too (qClaimHead).
	// It keeps that lease's token too (lease_token is not written here, as
	// PostgreSQL's qRetry keeps it for a holding job): a cancel before it
	// runs again keeps the hold (qJobCancel), which the old handler's
	// refused finish then ends (qCancelAck) instead of the rescuer at the
	// lease's end. The old token acts on nothing else: heartbeats,
	// finishes, releases and key give-backs match running jobs only, a
	// repeated completion (qJobFinishedCheck) completed ones, and the job
	// runs (and completes) again only under the new token of its next
	// claim.
	qJobRetry = `UPDATE jobs SET state = COALESCE(` + sqlRetryDepState + `,
        CASE WHEN ` + sqlRetryRunAt + ` > ?2 THEN 'scheduled' ELSE 'available' END),
    run_at = ` + sqlRetryRunAt + `, attempt = 0,
    finished_at = CASE WHEN ` + sqlRetryDepState + ` = 'cancelled' THEN ?2 END,
    last_error = CASE WHEN ` + sqlRetryDepState + ` = 'cancelled' THEN ` + sqlDepCancelReason + ` ELSE last_error END,
    resolved_at = NULL, resolution_note = ''
WHERE id = ?3 RETURNING ` + jobCols

	// sqlDepCancelReason is the last_error of job jobs.id cancelled for a
	// dead or cancelled dependency (the smallest one's id and state).
	sqlDepCancelReason = `(SELECT 'dependency ' || p.id || ' is ' || p.state
        FROM job_deps d JOIN jobs p ON p.id = d.depends_on_id
        WHERE d.job_id = jobs.id AND p.state IN ('dead', 'cancelled') ORDER BY p.id LIMIT 1)`

	// sqlRetryRunAt is the run_at qJobRetry gives the job: ?1, or the end
	// of the lease a cancelled job still holds when that is later.
	sqlRetryRunAt = `(CASE WHEN state = 'cancelled' AND lease_expires_at IS NOT NULL
        THEN max(?1, lease_expires_at) ELSE ?1 END)`

	// qKeyRetryReopen reopens the window of a window-0 key whose job
	// qJobRetry made unfinished again (qKeyFinal closed it at the job's
	// final state): the key blocks other jobs again until the job
	// finishes, and the record has no expiry meanwhile, as after the job's
	// insert. A completed record (a cached result the job's insert kept)
	// is reopened only while that result is live (its own expiry).
	// ?1 tenant, ?2 key, ?3 job id, ?4 now.
	qKeyRetryReopen = `UPDATE idem_keys SET dedup_until = NULL, expires_at = NULL
WHERE tenant = ?1 AND key = ?2 AND job_id = ?3 AND dedup_until IS NOT NULL
  AND (status <> 'completed' OR COALESCE(result_expires_at, expires_at) > ?4)
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = ?3 AND j.dedup_window_us = 0 AND j.finished_at IS NULL)`

	// qJobResolve marks dead job ?1 resolved at ?2 with note ?3 unless it
	// already is; qJobCancelGet then reads it.
	qJobResolve = `UPDATE jobs SET resolved_at = ?2, resolution_note = ?3
WHERE id = ?1 AND state = 'dead' AND resolved_at IS NULL AND (?4 = '' OR tenant = ?4)`

	qJobDelete      = `DELETE FROM jobs WHERE id = ?1 AND state = ?2 AND (?3 = '' OR tenant = ?3)`
	qJobDeleteByID  = `DELETE FROM jobs WHERE id = ?`
	qAttemptsDelete = `DELETE FROM attempts WHERE job_id = ?`
	qJobDepsDelete  = `DELETE FROM job_deps WHERE job_id = ?`
)

// Maintenance.
const (
	qRescueSelect = `SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at < ? ORDER BY lease_expires_at, id LIMIT ?`
	// qRescue: ?1 now, ?2 error, ?3 id. It returns the job as it left it
	// (store.RescuedJob's columns, then its key's).
	qRescue = `UPDATE jobs SET
    state            = CASE WHEN attempt >= max_attempts THEN 'dead' ELSE 'retryable' END,
    run_at           = ?1,
    finished_at      = CASE WHEN attempt >= max_attempts THEN ?1 ELSE NULL END,
    last_error       = ?2,
    lease_expires_at = NULL
WHERE id = ?3 AND state = 'running'
RETURNING state, tenant, queue, kind, attempt, idempotency_key, dedup_window_us, result_ttl_us`

	// qRunningUnder lists the jobs running under lease token ?1 (the
	// jobs_running index holds the running jobs and the holding ones).
	qRunningUnder = `SELECT id FROM jobs INDEXED BY jobs_running WHERE state = 'running' AND lease_token = ?1`

	qRelease = `UPDATE jobs SET state = 'available', run_at = ?1, attempt = max(0, attempt - 1),
    lease_expires_at = NULL, lease_token = '', worker_id = ''
WHERE id = ?2 AND state = 'running' AND lease_token = ?3
RETURNING tenant, idempotency_key`
)

// qPromote makes the due scheduled and retryable jobs at ?1 available, up
// to ?2 in all, the earliest run_at first whatever their queues
// (store.Maintenance; a queue with a backlog of due jobs no worker claims
// does not keep the promoter from the others'): a skip scan of jobs_due
// (queue, run_at, id) lists the queues that have such jobs, one probe
// each; each queue's first ?2 due jobs are one range that ends at its
// first job not yet due (migration 0031), so the jobs scheduled for later
// are never read; the earliest ?2 of those are made available. (Taken in
// queue order, a queue's backlog took every batch until it was gone.)
var qPromote = `WITH RECURSIVE qs(queue) AS (
    SELECT (SELECT queue FROM jobs WHERE ` + sqlDue("") + ` ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT queue FROM jobs WHERE ` + sqlDue("") + ` AND queue > qs.queue ORDER BY queue LIMIT 1)
    FROM qs WHERE qs.queue IS NOT NULL
), due AS (
    SELECT j.id FROM qs JOIN jobs j ON j.id IN (SELECT x.id FROM jobs x
        WHERE x.queue = qs.queue AND ` + sqlDue("x") + ` AND x.run_at <= ?1 ORDER BY x.run_at, x.id LIMIT ?2)
    WHERE qs.queue IS NOT NULL
    ORDER BY j.run_at, j.id LIMIT ?2
)
UPDATE jobs SET state = 'available'
WHERE id IN (SELECT id FROM due)
RETURNING queue`

// qClaimPromote makes the due scheduled and retryable jobs of queue ?1 at
// ?2 available, up to claimPromoteMax in run_at order. The claims read
// jobs_claim_tenant, which holds available jobs only (migration 0031):
// every claim runs this first for each of its queues, in its
// transaction, so that a job is claimable from its run_at on whether or
// not the promoter runs. It reads one range of jobs_due that ends at the
// first job not yet due: a claim never reads the jobs waiting for later,
// however many. It returns the ids it promoted (leftover), no row when
// none.
var qClaimPromote = `UPDATE jobs SET state = 'available'
WHERE id IN (SELECT id FROM jobs WHERE queue = ?1 AND ` + sqlDue("") + ` AND run_at <= ?2
    ORDER BY run_at, id LIMIT ` + strconv.Itoa(claimPromoteMax) + `)
RETURNING id`

// claimPromoteMax is the most due jobs of one queue a claim promotes
// (qClaimPromote), earliest first; the next claims and the promoter
// promote the rest.
const claimPromoteMax = 1000

// qRecordDeleteExpired deletes up to ?2 records expired at ?1, not those
// held by the running job they name past their stored expiry (sqlRunHeld):
// that job's completion caches its result in the record.
var qRecordDeleteExpired = `DELETE FROM idem_keys WHERE (tenant, key) IN
    (SELECT tenant, key FROM idem_keys WHERE ` + sqlRecordExpired("idem_keys", "?1") + ` LIMIT ?2)`

// qRecordDropResults drops the bytes of up to ?2 cached results expired at
// ?1 whose records live on for their dedup window (a result TTL shorter
// than the window); the record keeps its status, completion time and
// hash, and reads without a result (recordReadCols). It reads
// idem_keys_result_expires, which holds only the records that outlive
// their result (the others go whole, qRecordDeleteExpired).
const qRecordDropResults = `UPDATE idem_keys SET result = NULL, size_bytes = 0, compressed = 0
WHERE (tenant, key) IN (SELECT tenant, key FROM idem_keys WHERE result_expires_at <= ?1 AND result IS NOT NULL
    AND (expires_at IS NULL OR result_expires_at < expires_at) LIMIT ?2)`

// Record reads: a record is live unless it expired (sqlRecordExpired).
var (
	qRecordGet = `SELECT ` + recordReadCols + ` FROM idem_keys WHERE tenant = ?1 AND key = ?2
  AND (expires_at IS NULL OR NOT ` + sqlRecordExpired("idem_keys", "?3") + `)`
	qRecordGetAny = `SELECT ` + recordReadCols + ` FROM idem_keys WHERE key = ?2
  AND (expires_at IS NULL OR NOT ` + sqlRecordExpired("idem_keys", "?3") + `) AND ?1 = '' ORDER BY tenant LIMIT 1`
)

// Records.
const (
	qRecordGetWriter = `SELECT ` + recordLeaseCols + ` FROM idem_keys WHERE tenant = ? AND key = ?`

	// qRecordOwnLease reads the record of job ?3's key when the job holds
	// its lease without writing it: the record names the job, is in
	// progress and live, stores no lease, and the job is running under a
	// live job lease (?4 now). Its lease reads as the job's.
	qRecordOwnLease = `SELECT ` + recordLeaseCols + ` FROM idem_keys
WHERE tenant = ?1 AND key = ?2 AND job_id = ?3 AND status = 'in_progress' AND lease_owner = ''
  AND (expires_at IS NULL OR expires_at > ?4)
  AND EXISTS (SELECT 1 FROM jobs oj WHERE oj.id = ?3 AND oj.state = 'running' AND oj.lease_expires_at > ?4)`
	qRecordExists = `SELECT 1 FROM idem_keys WHERE tenant = ? AND key = ?`

	// qKeyHeld is a claim's last column (?2 = now): whether the claimed job
	// holds its key by its job lease (idemtype.JobRow.KeyHeld), as
	// qRecordOwnLease would read it in the attempt's acquire.
	// (A claim without a lease end stores NULL: never held, and never NULL.)
	qKeyHeld = `COALESCE(idempotency_key <> '' AND lease_expires_at > ?2 AND EXISTS (SELECT 1 FROM idem_keys kr
    WHERE kr.tenant = jobs.tenant AND kr.key = jobs.idempotency_key AND kr.job_id = jobs.id
      AND kr.status = 'in_progress' AND kr.lease_owner = '' AND (kr.expires_at IS NULL OR kr.expires_at > ?2)), 0)`

	// acquireExpired is qRecordAcquire's test of an expired record: by
	// its stored expiry, unless another running job it names holds it by
	// its job lease (sqlDerivedHeld; sqlRunHeld), as when its window ended
	// while that job ran. The acquirer's own job (?3) is not such a holder:
	// its record past the stored expiry is started afresh, as before.
	acquireExpired = `(expires_at <= ?6 AND NOT (status = 'in_progress' AND ` + sqlDerivedHeld + `))`

	// acquireDrop is qRecordAcquire's test of a record whose result is not
	// kept: the record expired, or its cached result did while the record
	// lives on for its dedup window (a result TTL shorter than the
	// window). Such a record is taken as one without a result (in
	// progress, created now, so it never reads as its job's completion),
	// keeping its key's fingerprint, job and window.
	acquireDrop = `(` + acquireExpired + ` OR (status = 'completed' AND result_expires_at <= ?6))`

	// qRecordAcquire: ?1 tenant, ?2 key, ?3 job id, ?4 owner, ?5 lease
	// until, ?6 now, ?7 dedup_until, ?8 expires_at. A stored lease keeps
	// its record live until the lease ends at least, whatever the TTL: a
	// lease without a job (?3 = 0: Do, result leases, the middleware) and
	// a job's (its key's record had expired, and the executor asks for an
	// expiry of now + the result TTL, which may come before the job's
	// first heartbeat; heartbeats then move both: qKeyLeaseExtend).
	qRecordAcquire = `INSERT INTO idem_keys (tenant, key, status, job_id, lease_owner, lease_until, created_at, dedup_until, expires_at)
VALUES (?1, ?2, 'in_progress', ?3, ?4, ?5, ?6, ?7, CASE WHEN ?8 < ?5 THEN ?5 ELSE ?8 END)
ON CONFLICT (tenant, key) DO UPDATE SET
    lease_owner   = excluded.lease_owner,
    lease_until   = excluded.lease_until,
    status        = CASE WHEN ` + acquireDrop + ` THEN 'in_progress' ELSE status END,
    fingerprint   = CASE WHEN ` + acquireExpired + ` THEN '' ELSE fingerprint END,
    job_id        = CASE WHEN ` + acquireExpired + ` THEN excluded.job_id
                         WHEN job_id = 0 THEN excluded.job_id ELSE job_id END,
    result_job_id = CASE WHEN ` + acquireDrop + ` THEN 0 ELSE result_job_id END,
    result        = CASE WHEN ` + acquireDrop + ` THEN NULL ELSE result END,
    result_hash   = CASE WHEN ` + acquireDrop + ` THEN '' ELSE result_hash END,
    size_bytes    = CASE WHEN ` + acquireDrop + ` THEN 0 ELSE size_bytes END,
    compressed    = CASE WHEN ` + acquireDrop + ` THEN 0 ELSE compressed END,
    created_at    = CASE WHEN ` + acquireDrop + ` THEN ?6 ELSE created_at END,
    completed_at  = CASE WHEN ` + acquireDrop + ` THEN NULL ELSE completed_at END,
    dedup_until   = CASE WHEN ` + acquireExpired + ` THEN excluded.dedup_until ELSE dedup_until END,
    expires_at    = CASE WHEN ` + acquireExpired + ` THEN excluded.expires_at
                         WHEN expires_at < excluded.lease_until THEN excluded.lease_until
                         ELSE expires_at END,
    duration_ms   = CASE WHEN ` + acquireDrop + ` THEN 0 ELSE duration_ms END,
    result_expires_at = CASE WHEN ` + acquireDrop + ` THEN NULL ELSE result_expires_at END
WHERE ` + acquireDrop + `
   OR (status = 'in_progress' AND (lease_owner = '' OR lease_owner = ?4 OR lease_until IS NULL OR lease_until <= ?6)
       AND NOT ` + sqlDerivedHeld + `)
RETURNING ` + recordCols

	// qRecordComplete: ?1 result, ?2 compressed, ?3 hash, ?4 now, ?5 ttl
	// us, ?6 duration, ?7 tenant, ?8 key, ?9 owner.
	qRecordComplete = `UPDATE idem_keys SET
    status       = 'completed',
    result       = ?1,
    size_bytes   = length(?1),
    compressed   = ?2,
    result_hash  = ?3,
    completed_at = ?4,
    result_expires_at = ?4 + ?5,
    expires_at   = max(COALESCE(dedup_until, ?4), ?4 + ?5),
    duration_ms  = ?6,
    lease_owner  = '',
    lease_until  = NULL
WHERE tenant = ?7 AND key = ?8 AND lease_owner = ?9 AND status = 'in_progress'
  AND (expires_at IS NULL OR expires_at > ?4)`
)

// qRecordDelete deletes the record (?1, ?2) unless its lease is live at
// ?3 (store.Records.RecordDelete): a stored lease that has not ended, or,
// for a record in progress that stores none, the live job lease of the
// running job it names (sqlRunHeld). qRecordExists then tells a refused
// delete (ErrKeyInProgress) from a missing record.
var qRecordDelete = `DELETE FROM idem_keys WHERE tenant = ?1 AND key = ?2
  AND NOT (status = 'in_progress' AND lease_owner <> '' AND lease_until > ?3)
  AND NOT ` + sqlRunHeld("idem_keys", "?3")

// qRecordStats counts records as RecordGet reads them: one held by the
// running job it names past its stored expiry is live, with the projected
// expiry (recordReadCols). A cached result counts (completed, size, and by
// its own expiry in the next 24 h) while it lives; past its expiry it is
// expired while its bytes await the sweep (qRecordDropResults), even though
// its record lives on for its window.
var qRecordStats = `SELECT
    COALESCE(sum(expires_at IS NULL OR expires_at > ?2), 0),
    COALESCE(sum((expires_at IS NULL OR expires_at > ?2) AND status = 'in_progress' AND NOT failed), 0),
    COALESCE(sum((expires_at IS NULL OR expires_at > ?2)
        AND CASE WHEN live_result THEN result_expires_at ELSE expires_at END > ?2
        AND CASE WHEN live_result THEN result_expires_at ELSE expires_at END <= ?3), 0),
    COALESCE(sum(expires_at <= ?2 OR (has_result AND result_expires_at <= ?2)), 0),
    COALESCE(sum(CASE WHEN (expires_at IS NULL OR expires_at > ?2) AND NOT COALESCE(result_expires_at <= ?2, 0)
        THEN size_bytes ELSE 0 END), 0),
    COALESCE(sum((expires_at IS NULL OR expires_at > ?2) AND live_result), 0),
    COALESCE(sum((expires_at IS NULL OR expires_at > ?2) AND status = 'in_progress' AND failed), 0)
FROM (SELECT CASE WHEN k.expires_at <= ?2 AND ` + sqlRunHeld("k", "?2") + `
        THEN (SELECT max(?2, fj.run_at, COALESCE(fj.lease_expires_at, 0)) + fj.result_ttl_us FROM jobs fj
              WHERE fj.id = k.job_id) ELSE k.expires_at END AS expires_at, k.status, k.size_bytes, k.status = 'in_progress' AND (EXISTS (SELECT 1 FROM jobs fj
        WHERE fj.id = k.job_id AND fj.state IN ('dead', 'cancelled'))
        OR (k.job_id <> 0 AND NOT (k.lease_owner <> '' AND k.lease_until > ?2)
            AND NOT EXISTS (SELECT 1 FROM jobs fj WHERE fj.id = k.job_id))) AS failed,
        k.result IS NOT NULL AS has_result, COALESCE(k.result_expires_at, k.expires_at) AS result_expires_at,
        k.status = 'completed' AND COALESCE(k.result_expires_at > ?2, 1) AS live_result
    FROM idem_keys k WHERE (?1 = '' OR k.tenant = ?1))`

// Leader and API keys.
const (
	qLeaderAttempt = `INSERT INTO leaders (name, owner, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE leaders.owner = excluded.owner OR leaders.expires_at <= ?4
RETURNING owner`
	qLeaderResign = `DELETE FROM leaders WHERE name = ? AND owner = ?`

	qAPIKeyCreate = `INSERT INTO api_keys (id, hash, tenant, admin, name, created_at, revoked_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	apiKeyCols    = `id, hash, tenant, admin, name, created_at, revoked_at`
	qAPIKeyByHash = `SELECT ` + apiKeyCols + ` FROM api_keys WHERE hash = ? AND revoked_at IS NULL ORDER BY seq LIMIT 1`
	qAPIKeyList   = `SELECT ` + apiKeyCols + ` FROM api_keys ORDER BY created_at, seq`
	qAPIKeyRevoke = `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`
)

// Statements that spell job states through sqlAvailable, sqlDue,
// sqlUnfinished and sqlFinished.
var (
	// qStatsOldest reads the available jobs through jobs_claim_tenant and
	// the due scheduled and retryable ones through jobs_due (0031).
	qStatsOldest = `SELECT queue, min(m) FROM (
    SELECT queue, min(run_at) AS m FROM jobs
    WHERE ` + sqlAvailable("") + ` AND run_at <= ?2 AND (?1 = '' OR tenant = ?1) GROUP BY queue
    UNION ALL
    SELECT queue, min(run_at) FROM jobs
    WHERE ` + sqlDue("") + ` AND run_at <= ?2 AND (?1 = '' OR tenant = ?1) GROUP BY queue
) GROUP BY queue`

	// qClaimHead is the FIFO head rule, appended to the claim's candidate
	// selection (table alias j).
	// A job is the head of its partition when no job of the partition with
	// a lower id is unfinished and no other job of it is running: a dead
	// or cancelled head that is retried (JobRetryMany) while its successor
	// runs waits for that successor to finish, then goes first among the
	// waiting jobs (lowest id). Both probes read jobs_partition_head (the
	// second repeats its predicate so that the partial index applies;
	// the state test then filters the partition's running rows).
	//
	// A cancelled job whose handler may still run (its hold: qJobCancel)
	// counts as running (sqlPartitionTaken, the predicate of
	// jobs_partition_head since migration 0026), and so does, for the
	// earlier jobs, a holding job retried (qJobRetry) until the end of the
	// lease it kept (?2 is the claim's now).
	qClaimHead = ` AND (j.partition_key = '' OR (NOT EXISTS (
    SELECT 1 FROM jobs h WHERE h.queue = j.queue AND h.partition_key = j.partition_key
        AND h.tenant = j.tenant AND h.id < j.id AND h.partition_key <> '' AND ` + sqlPartitionTaken + `)
    AND NOT EXISTS (
    SELECT 1 FROM jobs h WHERE h.queue = j.queue AND h.partition_key = j.partition_key
        AND h.tenant = j.tenant AND h.id > j.id AND h.partition_key <> '' AND ` + sqlPartitionTaken + `
        AND (h.state IN ('running', 'cancelled') OR h.lease_expires_at > ?2))))`

	// sqlPartitionTaken is true for a job h that keeps its partition's
	// later jobs waiting: an unfinished one, or a cancelled one that holds
	// it. It is written as jobs_partition_head's predicate (migration
	// 0026), so that SQLite proves the index usable.
	sqlPartitionTaken = `(` + sqlUnfinished("h") + `
        OR (h.state = 'cancelled' AND h.lease_expires_at IS NOT NULL))`

	// qRetentionSelect: ?1 completed before, ?2 cancelled before, ?3 dead
	// before (0 = keep), ?4 now, ?5 limit. A cancelled job that still holds
	// its lease (qJobCancel) is kept: its handler may still run, and
	// deleting the row would free its slot and partition.
	qRetentionSelect = `SELECT id FROM jobs j
WHERE ` + sqlFinished("j") + `
  AND ((j.state = 'completed' AND ?1 > 0 AND j.finished_at < ?1)
    OR (j.state = 'cancelled' AND ?2 > 0 AND j.finished_at < ?2 AND j.lease_expires_at IS NULL)
    OR (j.state = 'dead' AND ?3 > 0 AND j.finished_at < ?3))
  AND NOT EXISTS (SELECT 1 FROM idem_keys k
      WHERE j.idempotency_key <> '' AND k.tenant = j.tenant AND k.key = j.idempotency_key
        AND k.job_id = j.id AND (k.dedup_until IS NULL OR k.dedup_until > ?4)
        AND (k.expires_at IS NULL OR k.expires_at > ?4))
LIMIT ?5`

	// qJobKindStats aggregates the jobs created at or after ?2 (µs) per kind
	// and state (?1 tenant, "" = all; ?3 = store.JobKindStatsParams.FinishedSince,
	// µs). Each branch reads one partial index, so the query never walks the
	// history: finished jobs through jobs_finished from ?3, the claimable
	// ones through jobs_claim_tenant, running ones through jobs_running (its
	// predicate also takes the cancelled jobs still holding their
	// partition) and pending ones through
	// jobs_pending (0024).
	qJobKindStats = `SELECT kind, state, count(*),
    COALESCE(sum(attempt > 0 OR state = 'retryable'), 0), COALESCE(sum(attempt > 1 OR state = 'retryable'), 0),
    COALESCE(sum(ran), 0), COALESCE(sum(CASE WHEN ran THEN ms END), 0.0), COALESCE(max(CASE WHEN ran THEN ms END), 0.0)
FROM (
    SELECT kind, state, attempt,
        state = 'completed' AND was_cached = 0 AND started_at IS NOT NULL AND finished_at IS NOT NULL AS ran,
        (finished_at - started_at) / 1000.0 AS ms
    FROM jobs
    WHERE ` + sqlFinished("") + ` AND finished_at >= ?3
        AND created_at >= ?2 AND (?1 = '' OR tenant = ?1)
    UNION ALL
    SELECT kind, state, attempt, 0, 0.0 FROM jobs
    WHERE ` + sqlAvailable("") + ` AND created_at >= ?2 AND (?1 = '' OR tenant = ?1)
    UNION ALL
    SELECT kind, state, attempt, 0, 0.0 FROM jobs
    WHERE ` + sqlDue("") + ` AND created_at >= ?2 AND (?1 = '' OR tenant = ?1)
    UNION ALL
    SELECT kind, state, attempt, 0, 0.0 FROM jobs
    WHERE state = 'running' AND created_at >= ?2 AND (?1 = '' OR tenant = ?1)
    UNION ALL
    SELECT kind, state, attempt, 0, 0.0 FROM jobs
    WHERE state = 'pending' AND created_at >= ?2 AND (?1 = '' OR tenant = ?1)
) GROUP BY kind, state`
)
