package pgstore

import (
	"strconv"
	"strings"

	"github.com/idem-dev/idem/store"
)

// This file, queries_records.go (the statements on records) and
// queries_maintenance.go (the leader's sweeps) hold every SQL statement of
// pgstore except the migrations (migrations/*.sql).
// {schema} is replaced by the quoted schema name.

// Migrations.
const (
	qMigrationsTable = `CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.migrations (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	qMigrationsApplied = `SELECT version, applied_at FROM {schema}.migrations ORDER BY version`
	qMigrationsListed  = `SELECT version, name, applied_at FROM {schema}.migrations ORDER BY version`
	qMigrationsInsert  = `INSERT INTO {schema}.migrations (version, name) VALUES ($1, $2)`
	qMigrationsDelete  = `DELETE FROM {schema}.migrations WHERE version = $1`
)

// jobCols is the column list scanned by scanJob, in order.
const jobCols = `j.id, j.tenant, j.queue, j.kind, j.args::text, j.state, j.priority, j.attempt,
 j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.partition_key,
 j.idempotency_key, j.depends_on, j.result::text, j.was_cached, j.original_job_id, j.last_error,
 j.metadata::text, j.lease_token, j.lease_expires_at, j.worker_id, j.retry_policy::text,
 j.error_code, j.resolved_at, j.resolution_note, j.timeout_us`

// Job creation.
const (
	// qLockDeps locks the dependencies of a batch FOR SHARE: a dependency
	// cannot finish while the batch decides its dependants' initial state,
	// and a batch waits for a dependency's finish to commit. Without it a
	// dependant could be inserted pending just as its last dependency
	// completes, and nobody would release it.
	// The last column says whether a dependency is a cancelled job that
	// still holds its lease (its handler may still run: qJobCancel), which
	// a job waiting for any outcome waits for.
	qLockDeps = `SELECT id, tenant, state, state = 'cancelled' AND lease_expires_at IS NOT NULL
FROM {schema}.jobs WHERE id = ANY($1::bigint[]) ORDER BY id FOR SHARE`

	// qLockPartitions serialises the inserts of one FIFO partition (see
	// docs/postgres.md): ids are taken after the lock, so within a
	// partition id order is commit order and a claimer never sees a
	// successor whose lower-id predecessor is still uncommitted.
	qLockPartitions = `SELECT pg_advisory_xact_lock($1::integer, h)
FROM (SELECT DISTINCT hashtext(p) AS h FROM unnest($2::text[]) AS p ORDER BY 1) AS parts`

	// qUpsertRecords creates or reopens the idempotency records of keyed
	// items (sorted by tenant, key so concurrent batches lock in one order).
	// Each item has its own now ($6, stored as created_at, so the ON
	// CONFLICT clause reads it as excluded.created_at) and result TTL ($7).
	// A row is returned only when this batch owns the key now: there was no
	// record, or it expired, or its dedup window passed, or it belongs to no
	// job (a Do record), or the job it names no longer exists (deleted in its
	// window, by JobDelete: upGone). A live record reopened because its window
	// passed or its job is gone keeps its cached result while that result
	// lives (upDrop), until that result's own expiry (upKeptResult).
	//
	// held lists the jobs the records name in the statement's snapshot, and
	// lk locks them FOR SHARE before any record (the InitPlan): lk returns
	// the latest rows of those that exist, waiting for a writer in progress
	// (a deletion that commits leaves its job out of lk). A reopened record
	// that stores no lease while the job it named runs was leased by that
	// job's row (see qRecordAcquireMany): the lease is written into the
	// record, as it no longer names that job; a claim of that job either
	// committed before (and shows running) or waits for this transaction. A
	// record whose job changed since the snapshot (not in held: a concurrent
	// reopen's job, which this statement cannot see) is left to the next
	// round of insertExistingKeys.
	qUpsertRecords = `WITH u AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[],
        $6::timestamptz[], $7::bigint[]) WITH ORDINALITY
    AS u(tenant, key, fp, job_id, dedup_until, now, ttl_us, ord)
), held AS (
    SELECT r.job_id FROM u
    JOIN LATERAL (SELECT r.job_id FROM {schema}.records r WHERE r.tenant = u.tenant AND r.key = u.key
        AND r.job_id IS NOT NULL LIMIT 1) r ON true
), lk AS (
    SELECT hj.id, hj.state, hj.lease_expires_at, hj.was_cached, hj.finished_at, hj.result_ttl_us,
        hj.duration_ms, hj.result::text AS result, hj.tenant, hj.idempotency_key, hj.created_at, hj.dedup_window_us
    FROM {schema}.jobs hj
    WHERE hj.id = ANY (ARRAY(SELECT held.job_id FROM held)) ORDER BY hj.id FOR SHARE
), dv AS (
    SELECT lk.*, convert_to(COALESCE(lk.result, 'null'), 'UTF8') AS res, lk.finished_at AS fin,
        lk.duration_ms AS dur, lk.finished_at + lk.result_ttl_us * interval '1 microsecond' AS result_until
    FROM lk WHERE lk.state = 'completed' AND NOT lk.was_cached
)
INSERT INTO {schema}.records AS r
    (tenant, key, status, fingerprint, job_id, created_at, dedup_until, expires_at)
SELECT u.tenant, u.key, 'in_progress', u.fp, u.job_id, u.now, u.dedup_until, u.dedup_until
FROM u WHERE (SELECT count(*) FROM lk) >= 0 ORDER BY u.ord
ON CONFLICT (tenant, key) DO UPDATE SET
    job_id        = excluded.job_id,
    fingerprint   = excluded.fingerprint,
    dedup_until   = excluded.dedup_until,
    status        = CASE WHEN ` + upDrop + ` THEN 'in_progress' WHEN ` + upDerived + ` THEN 'completed' ELSE r.status END,
    result        = CASE WHEN ` + upDrop + ` THEN NULL WHEN ` + upDerived + `
                         THEN (SELECT dv.res FROM dv WHERE dv.id = r.job_id) ELSE r.result END,
    result_job_id = CASE WHEN ` + upDrop + ` THEN NULL WHEN ` + upDerived + ` THEN r.job_id ELSE r.result_job_id END,
    result_hash   = CASE WHEN ` + upDrop + ` THEN '' WHEN ` + upDerived + `
                         THEN (SELECT encode(sha256(dv.res), 'hex') FROM dv WHERE dv.id = r.job_id) ELSE r.result_hash END,
    size_bytes    = CASE WHEN ` + upDrop + ` THEN 0 WHEN ` + upDerived + `
                         THEN (SELECT octet_length(dv.res) FROM dv WHERE dv.id = r.job_id) ELSE r.size_bytes END,
    compressed    = CASE WHEN ` + upDrop + ` THEN false ELSE r.compressed END,
    completed_at  = CASE WHEN ` + upDrop + ` THEN NULL WHEN ` + upDerived + `
                         THEN (SELECT dv.fin FROM dv WHERE dv.id = r.job_id) ELSE r.completed_at END,
    duration_ms   = CASE WHEN ` + upDrop + ` THEN 0 WHEN ` + upDerived + `
                         THEN (SELECT dv.dur FROM dv WHERE dv.id = r.job_id) ELSE r.duration_ms END,
    lease_owner   = CASE WHEN ` + upExpired + ` THEN NULL
                         WHEN r.lease_owner IS NULL AND r.status = 'in_progress'
                         THEN (SELECT 'job:' || lk.id FROM lk WHERE lk.id = r.job_id AND lk.state = 'running')
                         ELSE r.lease_owner END,
    lease_until   = CASE WHEN ` + upExpired + ` THEN NULL
                         WHEN r.lease_owner IS NULL AND r.status = 'in_progress'
                         THEN (SELECT lk.lease_expires_at FROM lk WHERE lk.id = r.job_id AND lk.state = 'running')
                         ELSE r.lease_until END,
    created_at    = CASE WHEN ` + upExpired + ` THEN excluded.created_at ELSE r.created_at END,
    -- A cached result is never dropped before its own expiry, nor kept
    -- past it (upKeptResult: the new job's TTL is for the result it may
    -- store): window 0 blocks until the job finishes (NULL); otherwise the
    -- later of the new window and the kept result's expiry. A record in
    -- progress that a running job's lease holds (written in here, or
    -- stored already) expires no earlier than that lease ends (heartbeats
    -- move both: qHeartbeat), so it outlives the new job's window while
    -- the running job holds it.
    result_expires_at = CASE WHEN ` + upDrop + ` THEN NULL
                         WHEN ` + upDerived + ` THEN (SELECT dv.result_until FROM dv WHERE dv.id = r.job_id)
                         WHEN r.status = 'completed' THEN ` + upKeptResult + `
                    END,
    expires_at    = CASE WHEN excluded.dedup_until IS NULL THEN NULL
                         WHEN ` + upDrop + ` THEN excluded.dedup_until
                         WHEN ` + upDerived + ` THEN GREATEST(excluded.dedup_until,
                              (SELECT dv.result_until FROM dv WHERE dv.id = r.job_id))
                         WHEN r.status = 'in_progress' THEN GREATEST(excluded.dedup_until,
                              (SELECT lk.lease_expires_at FROM lk WHERE lk.id = r.job_id AND lk.state = 'running'
                                  AND r.lease_owner IS NULL),
                              CASE WHEN r.lease_owner LIKE 'job:%' THEN r.lease_until END)
                         WHEN r.status <> 'completed' OR r.completed_at IS NULL THEN excluded.dedup_until
                         ELSE GREATEST(excluded.dedup_until, ` + upKeptResult + `)
                    END
WHERE (r.job_id IS NULL OR r.dedup_until <= excluded.created_at OR ` + upExpired + ` OR ` + upGone + `)
  AND (` + upExpired + ` OR r.lease_owner IS NOT NULL OR r.status <> 'in_progress'
       OR r.job_id IS NULL OR r.job_id IN (SELECT held.job_id FROM held))
RETURNING r.tenant, r.key, r.job_id`

	// upKeptResult (qUpsertRecords) is the expiry of the cached result that
	// a reopen keeps: its own (a result TTL shorter or longer than the new
	// job's neither drops it early nor serves it late; before, it was
	// rebased on the new job's TTL); for a result stored before migration
	// 0023, which has none, the record's (it expires with its record); the
	// new job's TTL from its completion only when the record has neither
	// (such a result reopened by a window-0 job).
	upKeptResult = `COALESCE(r.result_expires_at, r.expires_at, r.completed_at + interval '1 microsecond' *
        (SELECT u.ttl_us FROM u WHERE u.tenant = excluded.tenant AND u.key = excluded.key LIMIT 1))`

	// upDrop (qUpsertRecords) is true of a record whose cached result the
	// reopen does not keep: the record expired (upExpired), or its stored
	// result did while the record lived on for its window (a result TTL
	// shorter than the window; a result read from the job row expires with
	// its record).
	upDrop = `(` + upExpired + ` OR (r.status = 'completed' AND r.result_expires_at <= excluded.created_at))`

	// upDerived (qUpsertRecords) is true of a record whose completion is
	// read from the row of the completed job it names (derivedJoin), which
	// lk locked: a reopen that keeps the cached result writes it into the
	// record, as the record will name the new job.
	upDerived = `EXISTS (SELECT 1 FROM dv dj WHERE dj.id = r.job_id AND ` + derivedCond + `)`

	// upExpired (qUpsertRecords) is true of a record that expired before
	// the new job's creation: by its stored expiry, or, for a record in
	// progress with no stored lease, by its job's row (locked in lk): a
	// completion read from the job row expires at the later of its window
	// and the result's expiry (derivedJoin); a job deleted since (in held,
	// not in lk) leaves the stored expiry. A record whose job is not in held
	// names a job it did not name in the snapshot (it changed since) and is
	// not expired here (the WHERE below then leaves it to the next round).
	// Nor is a record whose job runs under a live job lease (lk, by the
	// expiry clock: the item's now when $8, the caller's clock, decides,
	// else the database's), whatever its stored expiry: its window ended
	// while the job ran, and the job still holds it. A reopen after the
	// window then writes that job's lease into the record (lease_owner,
	// lease_until above), so the new job waits behind it. Nor is a record
	// whose stored lease lives by the same clock (a job's own stored lease:
	// the caller's clock may run ahead of the expiry it wrote,
	// docs/postgres.md "Clocks"): a reopen keeps that lease.
	upExpired = `(CASE WHEN r.status = 'in_progress' AND r.lease_owner IS NULL AND r.job_id IS NOT NULL
        THEN CASE WHEN NOT EXISTS (SELECT 1 FROM held WHERE held.job_id = r.job_id) THEN NULL
             WHEN EXISTS (SELECT 1 FROM lk WHERE lk.id = r.job_id AND lk.state = 'running'
                          AND lk.lease_expires_at > CASE WHEN $8::boolean THEN excluded.created_at ELSE now() END)
             THEN NULL
             ELSE COALESCE((SELECT GREATEST(r.dedup_until, dj.result_until) FROM dv dj
                            WHERE dj.id = r.job_id AND ` + derivedCond + `), r.expires_at) END
        WHEN r.lease_owner IS NOT NULL
             AND r.lease_until > CASE WHEN $8::boolean THEN excluded.created_at ELSE now() END THEN NULL
        ELSE r.expires_at END <= excluded.created_at)`

	// upGone (qUpsertRecords) is true of a record that names a job which no
	// longer exists: a job some record of the batch named in the snapshot
	// (held) that lk did not return. A job a committed record names was
	// committed no later than the record (its insert wrote both; an
	// acquirer names its own running job), so a job in held is missing from
	// lk only once deleted (JobDelete; retention spares a job whose record's
	// window is open) — before the snapshot, or by a deletion lk waited
	// for. Its record is reopened as SQLite's qKeyTake reopens one whose job
	// is gone: what it cached stays (status, result and expiry as for a
	// reopen of a passed window: the deleted job's completion, when read
	// from its row, was written into the record by qJobDelete first). A
	// record whose job changed since the snapshot (not in held) is not taken
	// for one whose job is gone: a concurrent reopen's job, which this
	// statement cannot see, so two reopens of one key never both win.
	upGone = `(r.job_id IN (SELECT held.job_id FROM held) AND r.job_id NOT IN (SELECT lk.id FROM lk))`

	// qExistingRecords reads the records of keys this batch did not get (a
	// new statement, so it sees the rows committed by the winners; the rows
	// stay locked by the ON CONFLICT above until this transaction ends). A
	// record may be reopened (the last column) when it names no job, its
	// window passed, it expired, or the job it names no longer exists (the
	// snapshot holds a committed record's job unless it was deleted: upGone
	// then decides under its lock); otherwise it answers with its job.
	qExistingRecords = `SELECT r.tenant, r.key, r.fingerprint, COALESCE(r.job_id, 0),
    COALESCE(r.job_id IS NULL OR r.dedup_until <= u.now OR r.expires_at <= u.now
        OR NOT EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.id = r.job_id), false)
FROM {schema}.records r
JOIN unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(tenant, key, now) ON r.tenant = u.tenant AND r.key = u.key`

	qInsertJobs = `INSERT INTO {schema}.jobs (id, tenant, queue, kind, args, state, priority, max_attempts,
    run_at, created_at, finished_at, partition_key, idempotency_key, depends_on, metadata, last_error,
    dedup_window_us, result_ttl_us, retry_policy, timeout_us)
SELECT CASE WHEN u.id = 0 THEN nextval(pg_get_serial_sequence('{schema}.jobs', 'id')) ELSE u.id END,
    u.tenant, u.queue, u.kind, u.args::json, u.state, u.priority, u.max_attempts,
    u.run_at, u.created_at, CASE WHEN u.state = 'cancelled' THEN u.created_at END,
    u.partition_key, u.idempotency_key, u.depends_on::bigint[], u.metadata::json, u.last_error,
    u.dedup_window_us, u.result_ttl_us, u.retry_policy::json, u.timeout_us
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::integer[],
    $8::integer[], $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
    $15::bigint[], $16::bigint[], $17::timestamptz[], $18::text[], $19::bigint[]) WITH ORDINALITY
    AS u(id, tenant, queue, kind, args, state, priority, max_attempts, run_at, partition_key,
         idempotency_key, depends_on, metadata, last_error, dedup_window_us, result_ttl_us, created_at,
         retry_policy, timeout_us, ord)
ORDER BY u.ord
RETURNING ` + jobColsRet

	// qInsertFast allocates one id per item in item order, creates the
	// records of the keys' leaders (rank > 0, locked in rank order: tenant,
	// key) unless they exist, and inserts the jobs of keyless items and of
	// the leaders whose record it created. It returns (id, inserted) per
	// item, in item order. A leader whose key existed is left to the
	// general path (qExistingRecords, qUpsertRecords), which reuses its id.
	// The sequence is looked up once (an InitPlan), not per row.
	qInsertFast = `WITH u AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[],
        $7::integer[], $8::timestamptz[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],
        $14::bigint[], $15::bigint[], $16::timestamptz[], $17::text[], $18::timestamptz[], $19::integer[],
        $20::text[], $21::bigint[])
        WITH ORDINALITY
    AS u(tenant, queue, kind, args, state, priority, max_attempts, run_at, partition_key, idempotency_key,
         depends_on, metadata, last_error, dedup_window_us, result_ttl_us, now, fp, dedup_until, rank,
         retry_policy, timeout_us, ord)
), ids AS MATERIALIZED (
    SELECT u.*, nextval((SELECT pg_get_serial_sequence('{schema}.jobs', 'id')::regclass)) AS id
    FROM u ORDER BY u.ord
), rec AS (
    INSERT INTO {schema}.records AS r
        (tenant, key, status, fingerprint, job_id, created_at, dedup_until, expires_at)
    SELECT ids.tenant, ids.idempotency_key, 'in_progress', ids.fp, ids.id, ids.now, ids.dedup_until, ids.dedup_until
    FROM ids WHERE ids.rank > 0 ORDER BY ids.rank
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING r.job_id
), ins AS (
    INSERT INTO {schema}.jobs (id, tenant, queue, kind, args, state, priority, max_attempts,
        run_at, created_at, finished_at, partition_key, idempotency_key, depends_on, metadata, last_error,
        dedup_window_us, result_ttl_us, retry_policy, timeout_us)
    SELECT ids.id, ids.tenant, ids.queue, ids.kind, ids.args::json, ids.state, ids.priority, ids.max_attempts,
        ids.run_at, ids.now, CASE WHEN ids.state = 'cancelled' THEN ids.now END,
        ids.partition_key, ids.idempotency_key, ids.depends_on::bigint[], ids.metadata::json, ids.last_error,
        ids.dedup_window_us, ids.result_ttl_us, ids.retry_policy::json, ids.timeout_us
    FROM ids WHERE ids.idempotency_key = '' OR ids.id IN (SELECT rec.job_id FROM rec)
    ORDER BY ids.ord
    RETURNING id
)
SELECT ids.id, ids.id IN (SELECT ins.id FROM ins) FROM ids ORDER BY ids.ord`

	// qNotify wakes the listeners of the schema's channel for each queue.
	qNotify = `SELECT pg_notify($1, q) FROM (SELECT DISTINCT unnest($2::text[]) AS q) AS qs`

	// qNotifyOne sends one notification on the schema's channel.
	qNotifyOne = `SELECT pg_notify($1, $2)`
)

// jobColsRet is jobCols for RETURNING clauses of statements on {schema}.jobs
// (which cannot use the alias j).
const jobColsRet = `id, tenant, queue, kind, args::text, state, priority, attempt,
 max_attempts, run_at, created_at, started_at, finished_at, partition_key,
 idempotency_key, depends_on, result::text, was_cached, original_job_id, last_error,
 metadata::text, lease_token, lease_expires_at, worker_id, retry_policy::text,
 error_code, resolved_at, resolution_note, timeout_us`

// Reads.
const (
	qJobGet   = `SELECT ` + jobCols + ` FROM {schema}.jobs j WHERE j.id = $1 AND ($2 = '' OR j.tenant = $2)`
	qJobsByID = `SELECT ` + jobCols + ` FROM {schema}.jobs j WHERE j.id = ANY($1::bigint[])`
	// qAttemptList reads the ended attempts of a job, then its running
	// attempt from the job row (attempt rows are written when they end),
	// or its completion, which is the completed job row unless a row for it
	// exists (deliveries; docs/state-machine.md, "Attempts").
	qAttemptList = `SELECT job_id, attempt, started_at, finished_at, duration_ms, outcome, error, worker_id, target, http_status
FROM (
    SELECT 0 AS k, id, job_id, attempt, started_at, finished_at, duration_ms, outcome, error, worker_id,
        target, http_status
    FROM {schema}.attempts WHERE job_id = $1
    UNION ALL
    SELECT 1, 0, id, attempt, started_at, NULL, 0, 'running', '', worker_id, '', 0
    FROM {schema}.jobs WHERE id = $1 AND state = 'running' AND started_at IS NOT NULL
    UNION ALL
    SELECT 1, 0, id, attempt, started_at, finished_at, duration_ms,
        CASE WHEN was_cached THEN 'cached' ELSE 'completed' END, '', worker_id, '', 0
    FROM {schema}.jobs j WHERE id = $1 AND state = 'completed' AND started_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM {schema}.attempts a WHERE a.job_id = j.id AND a.outcome IN ('completed', 'cached'))
) AS a ORDER BY k, id`
	qJobExists   = `SELECT EXISTS (SELECT 1 FROM {schema}.jobs WHERE id = $1 AND ($2 = '' OR tenant = $2))`
	qQueueCounts = `SELECT queue, state, count(*),
    min(run_at) FILTER (WHERE state = 'available' OR (state IN ('scheduled', 'retryable') AND run_at <= $2)),
    count(*) FILTER (WHERE resolved_at IS NULL)
FROM {schema}.jobs WHERE ($1 = '' OR tenant = $1) GROUP BY queue, state`
	// qQueueAttempts counts the last minute's completions from the
	// completed job rows (a completion is not an attempt row) and its
	// failures from the attempt rows.
	qQueueAttempts = `SELECT queue, sum(c)::bigint, sum(f)::bigint FROM (
    SELECT queue, 1 AS c, 0 AS f FROM {schema}.jobs
    WHERE state = 'completed' AND finished_at > $2::timestamptz - interval '1 minute' AND finished_at <= $2
      AND ($1 = '' OR tenant = $1)
    UNION ALL
    SELECT j.queue, 0, 1
    FROM {schema}.attempts a JOIN {schema}.jobs j ON j.id = a.job_id
    WHERE a.finished_at > $2::timestamptz - interval '1 minute' AND a.finished_at <= $2
      AND a.outcome IN ('failed', 'dead', 'lost') AND ($1 = '' OR j.tenant = $1)
) AS t GROUP BY queue`
)

// Heartbeats (claims: flow.go).
const (
	// qHeartbeat extends the leases that still match and have not expired
	// ($4 = the expiry clock, NULL for the database's): an expired lease is
	// lost even before the rescuer runs. The new end is $3 (Until as
	// given: under Config.CallerClock, or store.JobHeartbeatParams.Absolute),
	// or, when $3 is NULL, the database's now() plus $5 microseconds. A
	// record that stores the job's lease (one a later job of the key
	// reopened while this job ran: qUpsertRecords) gets the new lease end,
	// and, in progress, an expiry no earlier than it.
	qHeartbeat = `WITH u AS (
    SELECT * FROM unnest($1::bigint[], $2::text[]) AS u(id, token)
), upd AS (
    UPDATE {schema}.jobs j SET lease_expires_at = coalesce($3::timestamptz, now() + $5::bigint * interval '1 microsecond')
    FROM u WHERE j.id = u.id AND j.lease_token = u.token AND j.state = 'running'
      AND j.lease_expires_at > coalesce($4::timestamptz, now())
    RETURNING j.id, j.tenant, j.idempotency_key, j.lease_expires_at
), rec AS (
    UPDATE {schema}.records r SET lease_until = upd.lease_expires_at,
        expires_at = CASE WHEN r.status = 'in_progress' AND r.expires_at IS NOT NULL
                          THEN GREATEST(r.expires_at, upd.lease_expires_at) ELSE r.expires_at END
    FROM upd WHERE upd.idempotency_key <> '' AND r.tenant = upd.tenant AND r.key = upd.idempotency_key
      AND r.lease_owner = 'job:' || upd.id
)
SELECT id, lease_expires_at FROM upd`
)

// Finishing.
const (
	// qFinish ends the attempts whose lease still matches and inserts
	// their attempt rows, in one statement. started_at, worker_id and the
	// attempt number come from the job row (RETURNING gives the new
	// attempt, one lower for a snooze). A repeated finish matches no
	// running job, so it inserts nothing.
	// The state test is written (SELECT 'running') on purpose: a plain
	// 'running' lets the planner prove the predicate of jobs_lease_idx and
	// hash-join u against a scan of that whole index, which holds an entry
	// for every job that ran since the last vacuum; in the 100-worker work
	// run that made each finish take 100-300 ms of CPU instead of a few ms.
	// With the InitPlan the jobs are looked up by primary key.
	qFinish = `WITH u AS MATERIALIZED (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[],
        $7::bigint[], $8::timestamptz[], $9::boolean[], $10::timestamptz[], $11::bigint[], $12::text[],
        $13::integer[], $14::text[], $15::text[])
    AS u(id, token, state, error, result, was_cached, original_job_id, run_at, snooze, finished_at,
         duration_ms, outcome, http_status, target, code)
), upd AS (
    UPDATE {schema}.jobs j SET
        state = u.state,
        last_error = CASE WHEN u.error <> '' THEN u.error ELSE j.last_error END,
        error_code = CASE WHEN u.error <> '' THEN u.code ELSE j.error_code END,
        result = CASE WHEN u.state = 'completed' THEN u.result::json ELSE j.result END,
        was_cached = CASE WHEN u.state = 'completed' THEN u.was_cached ELSE j.was_cached END,
        original_job_id = CASE WHEN u.state = 'completed' THEN u.original_job_id ELSE j.original_job_id END,
        run_at = CASE WHEN u.state IN ('retryable', 'scheduled') AND u.run_at IS NOT NULL THEN u.run_at ELSE j.run_at END,
        attempt = CASE WHEN u.snooze THEN greatest(j.attempt - 1, 0) ELSE j.attempt END,
        finished_at = CASE WHEN u.state IN ('completed', 'dead', 'cancelled') THEN u.finished_at END,
        duration_ms = CASE WHEN u.state = 'completed' THEN u.duration_ms ELSE j.duration_ms END,
        lease_expires_at = NULL
    FROM u WHERE j.id = u.id AND j.state = (SELECT 'running') AND j.lease_token = u.token
    RETURNING j.id, j.state, j.queue, j.run_at, j.idempotency_key <> '' AS keyed,
        j.attempt + CASE WHEN u.snooze THEN 1 ELSE 0 END AS attempt, j.started_at, j.worker_id,
        u.finished_at, u.duration_ms, u.outcome, u.error, u.http_status, u.target
), att AS (
    INSERT INTO {schema}.attempts (job_id, attempt, started_at, finished_at, duration_ms, outcome, error,
        worker_id, target, http_status)
    SELECT id, attempt, started_at, finished_at, duration_ms, outcome, error, worker_id, target, http_status
    FROM upd WHERE NOT (upd.outcome IN ('completed', 'cached') AND upd.target = '') ORDER BY id
)
SELECT id, state, queue, run_at, keyed FROM upd`

	// qFinishedRepeat reads the jobs whose finish did not match, with their
	// latest attempt rows, to accept a repeated identical completion or
	// failure (store.FinishSeen).
	qFinishedRepeat = `SELECT j.id, j.state, j.lease_token, j.result::text, j.last_error, j.error_code, j.attempt,
    coalesce(a.attempt, 0), coalesce(a.outcome, ''), coalesce(a.error, '')
FROM {schema}.jobs j
LEFT JOIN LATERAL (SELECT attempt, outcome, error FROM {schema}.attempts
                   WHERE job_id = j.id ORDER BY id DESC LIMIT 1) a ON true
WHERE j.id = ANY($1::bigint[])`

	// qCompleteRecords stores the results of completed jobs in their records
	// and settles them as qSettleRecords would, in one write per record: the
	// lease is released and a window-0 key's window closes at the finish
	// (its expiry, the later of the two, is the result's). A record that
	// would read exactly as this write leaves it is not written (the usual
	// keyed completion; see derivedJoin): it names the job, is in progress
	// with no stored lease, its window is not 0 (a window-0 key's window
	// closes at the finish, which the insert path reads from the record)
	// and its stored expiry is the window's end (so the expiry derived from
	// the job is the one this write would store), the result expires at
	// most an hour after the window ends (the stored expiry, which the
	// expiry sweep and retention scan by, is then at most an hour early:
	// with the client's defaults, window = result TTL = 7 days, a job that
	// finished within an hour of its insert) and not before it (a result
	// TTL shorter than the window is written, with its own expiry), and the
	// result is derivable
	// ($7: the job's own JSON, uncompressed, hashed by SHA-256).
	qCompleteRecords = `UPDATE {schema}.records r SET
    status = 'completed', result = u.result, result_hash = u.hash, size_bytes = length(u.result),
    compressed = u.compressed, result_job_id = dj.id, completed_at = u.finished_at,
    dedup_until = CASE WHEN dj.dedup_window_us = 0 AND r.job_id = dj.id
                       THEN u.finished_at ELSE r.dedup_until END,
    expires_at = GREATEST(r.dedup_until, u.finished_at + dj.result_ttl_us * interval '1 microsecond'),
    result_expires_at = u.finished_at + dj.result_ttl_us * interval '1 microsecond',
    lease_owner = NULL, lease_until = NULL, duration_ms = u.duration_ms
FROM unnest($1::bigint[], $2::bytea[], $3::text[], $4::boolean[], $5::timestamptz[], $6::bigint[], $7::boolean[])
    AS u(id, result, hash, compressed, finished_at, duration_ms, derivable)
JOIN {schema}.jobs dj ON dj.id = u.id
WHERE dj.idempotency_key <> '' AND r.tenant = dj.tenant AND r.key = dj.idempotency_key
  AND NOT COALESCE(u.derivable AND ` + derivedCond + `, false)`

	// qSettleRecords releases the execution leases held by the given jobs
	// and closes the dedup window of keys whose window was 0 ("until the
	// job finishes") for the jobs that reached a final state: the record
	// then expires at the later of the finish and its cached result's
	// expiry (its own: stored by the job of the key that completed, whose
	// TTL may differ from this job's; CompletedAt + the job's ResultTTL for
	// a result stored before migration 0023), so a result is never dropped
	// early, whichever job of the key finished last. A record with
	// nothing to change is not written (a job holding its record by its job
	// lease has no stored lease to release).
	qSettleRecords = `UPDATE {schema}.records r SET
    lease_owner = CASE WHEN r.lease_owner = 'job:' || j.id THEN NULL ELSE r.lease_owner END,
    lease_until = CASE WHEN r.lease_owner = 'job:' || j.id THEN NULL ELSE r.lease_until END,
    dedup_until = CASE WHEN j.finished_at IS NOT NULL AND j.dedup_window_us = 0 AND r.job_id = j.id
                       THEN j.finished_at ELSE r.dedup_until END,
    expires_at  = CASE WHEN j.finished_at IS NOT NULL AND j.dedup_window_us = 0 AND r.job_id = j.id
                       THEN GREATEST(j.finished_at, CASE WHEN r.status = 'completed'
                           THEN COALESCE(r.result_expires_at, r.completed_at + j.result_ttl_us * interval '1 microsecond') END)
                       ELSE r.expires_at END
FROM {schema}.jobs j
WHERE j.id = ANY($1::bigint[]) AND j.idempotency_key <> ''
  AND r.tenant = j.tenant AND r.key = j.idempotency_key
  AND (r.lease_owner = 'job:' || j.id OR (j.finished_at IS NOT NULL AND j.dedup_window_us = 0 AND r.job_id = j.id))`

	// qLockDependants locks the pending dependants of completed jobs (and,
	// in cancelDependants, of dead or cancelled ones), in id order. Two dependencies of one job completing in concurrent
	// transactions would otherwise each see the other still running and
	// neither release the dependant; with the lock, the second waits for the
	// first to commit and its next statement sees both completed.
	qLockDependants = `SELECT id FROM {schema}.jobs
WHERE state = 'pending' AND depends_on && $1::bigint[] ORDER BY id FOR UPDATE`

	// qMarkDepsAny flags jobs that wait for any outcome of their
	// dependencies (inserted in the same transaction).
	qMarkDepsAny = `UPDATE {schema}.jobs SET deps_any = true WHERE id = ANY($1::bigint[])`

	// qReleaseDependants makes locked pending jobs whose dependencies are
	// all satisfied available (scheduled when run_at is later than now):
	// all completed, or all finished for a job that waits for any outcome
	// (deps_any), a cancelled one only once its hold ended (its handler may
	// still run until then: qJobCancel; the end of the hold releases them,
	// releaseAfterHolds).
	qReleaseDependants = `UPDATE {schema}.jobs j SET
    state = CASE WHEN j.run_at > $2 THEN 'scheduled' ELSE 'available' END
WHERE j.id = ANY($1::bigint[]) AND j.state = 'pending'
  AND NOT EXISTS (SELECT 1 FROM {schema}.jobs d WHERE d.id = ANY(j.depends_on) AND d.state <> 'completed'
                  AND (NOT j.deps_any OR d.state NOT IN ('dead', 'cancelled')
                       OR (d.state = 'cancelled' AND d.lease_expires_at IS NOT NULL)))
RETURNING j.id, j.queue, j.state`

	// qCancelDependants cancels the pending direct dependants of dead or
	// cancelled jobs, naming the dependency and its state.
	qCancelDependants = `UPDATE {schema}.jobs j SET
    state = 'cancelled', finished_at = $2,
    last_error = 'dependency ' || d.id || ' is ' || d.state
FROM {schema}.jobs d
WHERE j.state = 'pending' AND NOT j.deps_any AND j.depends_on && $1::bigint[]
  AND d.id = ANY($1::bigint[]) AND d.id = ANY(j.depends_on)
RETURNING j.id`
)

// Cancel, retry, delete.
const (
	qJobLock = `SELECT tenant, state, lease_token FROM {schema}.jobs WHERE id = $1 FOR UPDATE`

	// qJobCancel cancels job $1. A running job keeps its lease token and
	// end (the hold, migration 0026): its handler may still run, so it
	// keeps its slot under the concurrency limits of its scope
	// (sqlSlotTaken), and a job of a FIFO partition its partition
	// (sqlPartitionTaken), until its process acknowledges the cancel
	// (qCancelAck) or the rescuer ends the hold once the lease ended
	// (qCancelHoldEnd). The lease is not renewed any more (qHeartbeat reads
	// running jobs only), and a cancelled row's lease is not shown (scanJob).
	// A waiting job that still holds the end of a cancelled run's lease
	// (retried while it held: qRetry) keeps it too, with that run's token:
	// the old handler's refused finish, once it returned, ends this hold
	// as it ends a first one (qCancelAck). Any other job's token is
	// cleared (no handler of it can hold anything).
	qJobCancel = `UPDATE {schema}.jobs SET state = 'cancelled', finished_at = $2, last_error = $3,
    lease_token = CASE WHEN state = 'running' OR lease_expires_at > $2
        THEN lease_token ELSE '' END,
    lease_expires_at = CASE WHEN state = 'running' OR lease_expires_at > $2
        THEN lease_expires_at END
WHERE id = $1 RETURNING ` + jobColsRet

	// qCancelAck ends the holds of cancelled jobs ($1 ids) whose lease
	// tokens ($2) are the finishing ones: their handlers returned, their
	// partitions move on. It returns their ids (releaseAfterHolds) and the
	// queues to wake.
	qCancelAck = `UPDATE {schema}.jobs j SET lease_expires_at = NULL
FROM unnest($1::bigint[], $2::text[]) AS u(id, token)
WHERE j.id = u.id AND j.state = 'cancelled' AND j.lease_token = u.token AND j.lease_expires_at IS NOT NULL
RETURNING j.id, j.queue`

	// qCancelHoldEnd ends the holds whose lease ended by the expiry clock
	// $1 (NULL: the database's now()), up to $2, as the rescuer takes
	// running jobs back: the job stays cancelled. It returns their ids
	// (releaseAfterHolds) and the queues to wake. The candidates are
	// chosen once (a MATERIALIZED CTE, as qRescue's): written as
	// "j.id IN (SELECT … LIMIT $2 FOR UPDATE SKIP LOCKED)" the planner ran
	// the subquery once per cancelled row, each run skipping the rows
	// already updated, so one call ended every expired hold whatever $2.
	// The update finds them by primary key (= ANY), as the claim's does.
	qCancelHoldEnd = `WITH cand AS MATERIALIZED (
    SELECT id FROM {schema}.jobs
    WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL AND lease_expires_at < coalesce($1::timestamptz, now())
    ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.jobs j SET lease_expires_at = NULL
WHERE j.id = ANY(ARRAY(SELECT id FROM cand)) AND j.state = 'cancelled'
RETURNING j.id, j.queue`

	// qAttemptCancel inserts the cancelled attempt of a running job (run
	// before qJobCancel, in the same transaction, with the job locked).
	qAttemptCancel = `INSERT INTO {schema}.attempts (job_id, attempt, started_at, finished_at, duration_ms,
    outcome, error, worker_id)
SELECT id, attempt, started_at, $2,
    greatest((extract(epoch FROM $2::timestamptz - started_at) * 1000)::bigint, 0), 'cancelled', $3, worker_id
FROM {schema}.jobs WHERE id = $1 AND state = 'running' AND started_at IS NOT NULL`

	qRetrySelectIDs = `SELECT id FROM {schema}.jobs
WHERE id = ANY($1::bigint[]) AND ($2 = '' OR tenant = $2) AND state = ANY($3::text[])
ORDER BY id LIMIT $4 FOR UPDATE`

	// qRetryLockDeps locks the dependencies of the jobs being retried
	// (locked already) FOR SHARE, in id order, as an insert does
	// (qLockDeps): a dependency's finish then waits for the retry to
	// commit, and its next statement sees the retried job pending and
	// releases (or cancels) it; a finish already under way is waited for,
	// and qRetry's snapshot, taken after this statement, sees it.
	qRetryLockDeps = `SELECT id FROM {schema}.jobs
WHERE id IN (SELECT unnest(depends_on) FROM {schema}.jobs WHERE id = ANY($1::bigint[]))
ORDER BY id FOR SHARE`

	// sqlRetryRefused is true for a job j that JobRetryMany refuses
	// (store.RetryRefusal): it never started (attempt 0, no attempt
	// stored), waits for its dependencies to complete, and one of them no
	// longer exists.
	sqlRetryRefused = `(NOT j.deps_any AND j.attempt = 0
    AND EXISTS (SELECT 1 FROM unnest(j.depends_on) dep(id)
                WHERE NOT EXISTS (SELECT 1 FROM {schema}.jobs d WHERE d.id = dep.id))
    AND NOT EXISTS (SELECT 1 FROM {schema}.attempts a WHERE a.job_id = j.id))`

	// qRetryRefused lists the jobs of $1 that JobRetryMany refuses, each
	// with its smallest missing dependency, in id order. It runs after
	// qRetryLockDeps: a dependency deleted later waits for the retry's
	// commit, so what it reads holds until then.
	qRetryRefused = `SELECT j.id, (SELECT min(dep.id) FROM unnest(j.depends_on) dep(id)
        WHERE NOT EXISTS (SELECT 1 FROM {schema}.jobs d WHERE d.id = dep.id))
FROM {schema}.jobs j
WHERE j.id = ANY($1::bigint[]) AND ` + sqlRetryRefused + `
ORDER BY j.id`

	// qRetryLockPartitions locks, in id order and waiting for them, the
	// unfinished jobs of the FIFO partitions of the jobs being retried
	// that come after them, and writes a new version of those of them that
	// a claim could take (available, scheduled, retryable: a no-op update).
	// A claim of such a job that is under way (it holds the row FOR UPDATE
	// until it commits) is waited for, so a claim whose snapshot follows
	// the retry's commit sees that job running and leaves the retried one
	// waiting (the head rule, tenantClaimProbe); a claim that reaches the
	// row while it is locked skips it; and a claim whose snapshot predates
	// the retry's commit but that reaches the row after it finds the row
	// changed since its snapshot and skips it too (tenantClaimProbe's
	// version check), although its snapshot still shows the retried job
	// finished. The update finds the locked rows by primary key (= ANY), as
	// the claim's does (qClaimOne: joined to its CTE, that one was planned
	// as a hash join over a sequential scan of jobs).
	qRetryLockPartitions = `WITH l AS (
    SELECT h.id, h.state FROM {schema}.jobs r
    JOIN {schema}.jobs h ON h.tenant = r.tenant AND h.queue = r.queue AND h.partition_key = r.partition_key
        AND h.id > r.id AND h.partition_key <> ''
        AND h.state IN ('pending', 'scheduled', 'available', 'running', 'retryable')
    WHERE r.id = ANY($1::bigint[]) AND r.partition_key <> ''
    ORDER BY h.id FOR UPDATE OF h
)
UPDATE {schema}.jobs j SET partition_key = j.partition_key
WHERE j.id = ANY(ARRAY(SELECT l.id FROM l WHERE l.state IN ('scheduled', 'available', 'retryable')))`

	// qRetry reopens jobs $1 with run_at $2 at now $3, in the state an
	// insert would give them now (store.Jobs.JobInsertMany, "Initial
	// state"): cancelled again when a dependency is dead or cancelled
	// (unless it waits for any outcome: deps_any), pending while a
	// dependency is unfinished, else scheduled or available by run_at.
	//
	// A cancelled job that still holds its lease (its handler may still
	// run: qJobCancel) runs again no earlier than the end of that lease
	// (sqlRetryRunAt), so its new attempt never overlaps the old one. It
	// keeps that lease's end (lease_expires_at, NULL on any other dead or
	// cancelled job) until it is claimed again: the head rule's later-job
	// probe (tenantClaimProbe) holds an earlier job of the partition that
	// waits for it until then too. It keeps that lease's token as well, as
	// SQLite's qJobRetry does: a cancel before it runs again keeps the
	// hold (qJobCancel), which the old handler's refused finish then ends
	// (qCancelAck) instead of the rescuer at the lease's end. The old token
	// acts on nothing else: heartbeats, finishes, releases and key
	// give-backs match running jobs only, a repeated completion completed
	// ones, and the job runs (and completes) again only under the new
	// token of its next claim. Any other retried job's token is cleared.
	qRetry = `UPDATE {schema}.jobs j SET
    state = COALESCE(` + sqlRetryDepState + `,
        CASE WHEN ` + sqlRetryRunAt + ` > $3::timestamptz THEN 'scheduled' ELSE 'available' END),
    run_at = ` + sqlRetryRunAt + `, attempt = 0,
    lease_token = CASE WHEN j.state = 'cancelled' AND j.lease_expires_at IS NOT NULL THEN j.lease_token ELSE '' END,
    finished_at = CASE WHEN ` + sqlRetryDepState + ` = 'cancelled' THEN $3::timestamptz END,
    last_error = CASE WHEN ` + sqlRetryDepState + ` = 'cancelled' THEN ` + sqlDepCancelReason + ` ELSE j.last_error END,
    resolved_at = NULL, resolution_note = ''
WHERE j.id = ANY($1::bigint[])
RETURNING ` + jobColsRet

	// sqlDepCancelReason is the last_error of job j cancelled for a dead or
	// cancelled dependency (the smallest one's id and state).
	sqlDepCancelReason = `(SELECT 'dependency ' || d.id || ' is ' || d.state
        FROM {schema}.jobs d WHERE d.id = ANY(j.depends_on) AND d.state IN ('dead', 'cancelled')
        ORDER BY d.id LIMIT 1)`

	// sqlRetryRunAt is the run_at qRetry gives job j: $2, or the end of
	// the lease a cancelled j still holds when that is later.
	sqlRetryRunAt = `(CASE WHEN j.state = 'cancelled' AND j.lease_expires_at IS NOT NULL
        THEN greatest($2::timestamptz, j.lease_expires_at) ELSE $2::timestamptz END)`

	// qRetryDepsInSet lists the jobs of $1 that depend on other jobs of
	// $1, with those dependencies (JobRetryMany: retryLevels).
	qRetryDepsInSet = `SELECT j.id, ARRAY(SELECT d FROM unnest(j.depends_on) d WHERE d = ANY($1::bigint[]))
FROM {schema}.jobs j WHERE j.id = ANY($1::bigint[]) AND j.depends_on && $1::bigint[]`

	// sqlRetryDepState is what the dependencies of job j make of it
	// (qRetry): 'cancelled' when one is dead or cancelled and j does not
	// wait for any outcome, 'pending' when one is unfinished or a cancelled
	// one still holds its lease (its handler may still run), NULL
	// otherwise (none, or all satisfied).
	sqlRetryDepState = `(SELECT CASE
        WHEN NOT j.deps_any AND bool_or(d.state IN ('dead', 'cancelled')) THEN 'cancelled'
        WHEN bool_or(d.state NOT IN ('completed', 'dead', 'cancelled')
            OR (d.state = 'cancelled' AND d.lease_expires_at IS NOT NULL)) THEN 'pending' END
    FROM {schema}.jobs d WHERE d.id = ANY(j.depends_on))`

	// qRetryReopenRecords reopens the windows of the window-0 keys of jobs
	// $1 that qRetry made unfinished again (qSettleRecords closed them at
	// the jobs' final states): each key blocks other jobs again until its
	// job finishes, and its record has no expiry meanwhile, as after the
	// job's insert. A completed record (a cached result the job's insert
	// kept) is reopened only while that result is live at $2 (its own
	// expiry; the record's for a result stored before migration 0023).
	qRetryReopenRecords = `UPDATE {schema}.records r SET dedup_until = NULL, expires_at = NULL
FROM {schema}.jobs j
WHERE j.id = ANY($1::bigint[]) AND j.idempotency_key <> '' AND j.dedup_window_us = 0 AND j.finished_at IS NULL
  AND r.tenant = j.tenant AND r.key = j.idempotency_key AND r.job_id = j.id AND r.dedup_until IS NOT NULL
  AND (r.status <> 'completed' OR COALESCE(r.result_expires_at, r.expires_at) > $2)`

	// qJobResolve marks dead job $1 resolved at $2 with note $3 unless it
	// already is; qJobGet then reads it.
	qJobResolve = `UPDATE {schema}.jobs SET resolved_at = $2, resolution_note = $3
WHERE id = $1 AND state = 'dead' AND resolved_at IS NULL AND ($4 = '' OR tenant = $4)`

	// qJobDelete deletes a job and its attempts (attempts has no foreign
	// key: see migration 4). Its row count is that of the job. dj locks the
	// job first, and every other part works from dj: a retry (or resolve)
	// committing while the statement waits for the row makes dj re-read it,
	// and a job no longer in state $2 is left whole (before, the attempts
	// were deleted by the statement's snapshot while the job, retried
	// meanwhile, stayed: a requeue racing a DLQ delete lost the job's
	// history). A record whose completion is read from this job's row
	// (derivedJoin) gets it written first, so the cached result outlives
	// the job as it would have had the completion written it.
	qJobDelete = `WITH dj AS (
    SELECT j.*, convert_to(COALESCE(j.result::text, 'null'), 'UTF8') AS d_res
    FROM {schema}.jobs j WHERE j.id = $1 AND j.state = $2 AND ($3 = '' OR j.tenant = $3)
    FOR UPDATE
), m AS (
    UPDATE {schema}.records r SET ` + derivedWrite + `
    FROM dj
    WHERE r.tenant = dj.tenant AND r.key = dj.idempotency_key AND ` + derivedCond + `
), a AS (
    DELETE FROM {schema}.attempts a USING dj WHERE a.job_id = dj.id
)
DELETE FROM {schema}.jobs j USING dj WHERE j.id = dj.id`
)

// Leaders and API keys.
const (
	// qLeaderAttempt takes the leader row when it is free, expired by the
	// expiry clock $6 (NULL: the database's now()), or already Owner's. The
	// term ends at $4, or, when $4 is NULL, at now() plus $5 microseconds.
	qLeaderAttempt = `INSERT INTO {schema}.leaders AS l (name, owner, elected_at, expires_at)
VALUES ($1, $2, $3, coalesce($4::timestamptz, now() + $5::bigint * interval '1 microsecond'))
ON CONFLICT (name) DO UPDATE SET
    owner = excluded.owner,
    elected_at = CASE WHEN l.owner = excluded.owner THEN l.elected_at ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE l.owner = excluded.owner OR l.expires_at <= coalesce($6::timestamptz, now())
RETURNING owner`

	qLeaderResign = `DELETE FROM {schema}.leaders WHERE name = $1 AND owner = $2`

	apiKeyCols = `id, hash, tenant, admin, name, created_at, revoked_at`

	qAPIKeyCreate = `INSERT INTO {schema}.api_keys (id, hash, tenant, admin, name, created_at, revoked_at)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`
	qAPIKeyByHash = `SELECT ` + apiKeyCols + ` FROM {schema}.api_keys WHERE hash = $1 AND revoked_at IS NULL`
	qAPIKeyList   = `SELECT ` + apiKeyCols + ` FROM {schema}.api_keys ORDER BY created_at, id`
	qAPIKeyRevoke = `UPDATE {schema}.api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1`
)

// jobFilterSQL returns the WHERE clause (alias j) and arguments of a filter;
// argument numbers start at first.
func jobFilterSQL(f *store.JobFilter, first int) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(first+len(args)-1)))
	}
	if f.Tenant != "" {
		add("j.tenant = $?", f.Tenant)
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		add("j.state = ANY($?::text[])", states)
	}
	if f.Queue != "" {
		add("j.queue = $?", f.Queue)
	}
	if f.Kind != "" {
		add("j.kind = $?", f.Kind)
	}
	if f.PartitionKey != "" {
		add("j.partition_key = $? AND j.partition_key <> ''", f.PartitionKey)
	}
	if f.IdempotencyKey != "" {
		add("j.idempotency_key = $? AND j.idempotency_key <> ''", f.IdempotencyKey)
	}
	if f.BatchID != 0 {
		add("j.batch_id = $?", f.BatchID)
	}
	if f.ErrorCode != "" {
		add("j.error_code = $?", f.ErrorCode)
	}
	if f.Resolved != nil {
		conds = append(conds, map[bool]string{true: "j.resolved_at IS NOT NULL", false: "j.resolved_at IS NULL"}[*f.Resolved])
	}
	if !f.Since.IsZero() {
		add("j.created_at >= $?", f.Since)
	}
	if !f.Until.IsZero() {
		add("j.created_at < $?", f.Until)
	}
	if !f.FinishedSince.IsZero() {
		add("j.finished_at >= $?", f.FinishedSince)
	}
	if len(conds) == 0 {
		return "true", nil
	}
	return strings.Join(conds, " AND "), args
}

// qJobList returns the list query for a filter clause: $1 cursor, $2 limit.
func qJobList(where string) string {
	return `SELECT ` + jobCols + ` FROM {schema}.jobs j
WHERE ($1::bigint = 0 OR j.id < $1) AND ` + where + ` ORDER BY j.id DESC LIMIT $2`
}

// qRetrySelectFilter selects retry candidates by filter: $1 states, $2 limit.
func qRetrySelectFilter(where string) string {
	return `SELECT j.id FROM {schema}.jobs j WHERE j.state = ANY($1::text[]) AND ` + where +
		` AND NOT ` + sqlRetryRefused + ` ORDER BY j.id LIMIT $2 FOR UPDATE`
}

// qJobKindStats aggregates the jobs created at or after $2 per kind and
// state ($1 tenant, "" = all; $3 = store.JobKindStatsParams.FinishedSince).
// Each branch reads one partial index, so the query never walks the
// history: finished jobs through jobs_finished_idx from $3, the
// claimable ones through jobs_claim_tenant_idx, running ones through
// jobs_lease_idx or jobs_running_scope_idx (which also holds the cancelled
// jobs still holding their partition since 0028; the state test drops
// them) and pending ones through jobs_pending_idx (0024).
const qJobKindStats = `SELECT kind, state, count(*),
    count(*) FILTER (WHERE attempt > 0 OR state = 'retryable'),
    count(*) FILTER (WHERE attempt > 1 OR state = 'retryable'),
    count(*) FILTER (WHERE ran),
    coalesce(sum(ms) FILTER (WHERE ran), 0)::float8,
    coalesce(max(ms) FILTER (WHERE ran), 0)::float8
FROM (
    SELECT kind, state, attempt,
        state = 'completed' AND NOT was_cached AND started_at IS NOT NULL AND finished_at IS NOT NULL AS ran,
        extract(epoch FROM finished_at - started_at)::float8 * 1000 AS ms
    FROM {schema}.jobs
    WHERE state IN ('completed', 'dead', 'cancelled') AND finished_at >= $3
        AND created_at >= $2 AND ($1 = '' OR tenant = $1)
    UNION ALL
    SELECT kind, state, attempt, false, 0 FROM {schema}.jobs
    WHERE state = 'available' AND created_at >= $2 AND ($1 = '' OR tenant = $1)
    UNION ALL
    SELECT kind, state, attempt, false, 0 FROM {schema}.jobs
    WHERE state IN ('scheduled', 'retryable') AND created_at >= $2 AND ($1 = '' OR tenant = $1)
    UNION ALL
    SELECT kind, state, attempt, false, 0 FROM {schema}.jobs
    WHERE state = 'running' AND created_at >= $2 AND ($1 = '' OR tenant = $1)
    UNION ALL
    SELECT kind, state, attempt, false, 0 FROM {schema}.jobs
    WHERE state = 'pending' AND created_at >= $2 AND ($1 = '' OR tenant = $1)
) j GROUP BY kind, state`
