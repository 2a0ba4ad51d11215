package pgstore

// The statements on records: reads, the execution lease (acquire, renew,
// complete, release), statistics. The record parts of the job statements
// (inserts, claims, finishes, maintenance) stay with those in queries.go.

// Records.
const (
	recordCols = `tenant, key, status, fingerprint, COALESCE(job_id, 0), COALESCE(result_job_id, 0), result,
    result_hash, size_bytes, compressed, COALESCE(lease_owner, ''), lease_until, created_at, completed_at,
    dedup_until, expires_at, duration_ms, result_expires_at`

	// derivedCond is true of a record r whose completion is read from the
	// row of job dj (derivedJoin): what qCompleteRecords leaves unwritten
	// (there with the Go-side check that the result is derivable), on
	// columns neither changes while it holds. The record is the one the
	// job's own insert wrote (its key, its job, its creation time: a record
	// an acquire made or reset later has the acquirer's), in progress with
	// no stored lease; the job completed by its own run; its window is not
	// 0, the stored expiry is the window's end, and the result expires
	// neither before it nor more than an hour after it (a result that
	// expires before its record, a result TTL shorter than the window, is
	// written: its record keeps its own result expiry, result_expires_at,
	// and the expiry sweep finds it to drop its bytes; the derived
	// result's expiry is the record's).
	derivedCond = `(r.status = 'in_progress' AND r.lease_owner IS NULL AND r.job_id = dj.id
        AND dj.state = 'completed' AND NOT dj.was_cached
        AND r.tenant = dj.tenant AND r.key = dj.idempotency_key AND r.created_at = dj.created_at
        AND dj.dedup_window_us > 0 AND r.expires_at = r.dedup_until
        AND dj.finished_at + dj.result_ttl_us * interval '1 microsecond' <= r.dedup_until + interval '1 hour'
        AND dj.finished_at + dj.result_ttl_us * interval '1 microsecond' >= r.dedup_until)`

	// derivedWrite is the SET list that writes into a record r the
	// completion it reads from the row of its completed job dj (derivedCond;
	// dj.d_res the job's result as derivedJoin reads it): what
	// qCompleteRecords would have written. The writers that separate a
	// record from its job row use it (qJobDelete, qDeleteFinished).
	derivedWrite = `status = 'completed', result = dj.d_res, result_hash = encode(sha256(dj.d_res), 'hex'),
        size_bytes = octet_length(dj.d_res), compressed = false, result_job_id = dj.id, completed_at = dj.finished_at,
        duration_ms = dj.duration_ms,
        expires_at = GREATEST(r.dedup_until, dj.finished_at + dj.result_ttl_us * interval '1 microsecond'),
        result_expires_at = dj.finished_at + dj.result_ttl_us * interval '1 microsecond'`

	// derivedJoin joins a record r to the completed job whose row holds
	// the record's completion (d.d_id NULL when there is none; derivedCond).
	// qCompleteRecords leaves such records
	// unwritten when they would read the same, so a keyed job writes its
	// record once (its insert); every reader of a record's status or result
	// derives them through this join: status 'completed', result the job's
	// JSON (JSON null when it has none), hash its SHA-256, size its length,
	// result_job_id the job, completed_at its finish, duration_ms its
	// duration, expires_at the later of the window's end and the finish
	// plus the job's result TTL (what qCompleteRecords would have written;
	// the stored expiry stays the window's end, at most an hour earlier, so
	// the expiry sweep checks the job before deleting such a record). The
	// writers that would separate the record from its job write the
	// completion into the record first: JobDelete (qJobDelete), retention
	// (qDeleteFinished) and a reopen that keeps the cached result
	// (qUpsertRecords).
	derivedJoin = `LEFT JOIN LATERAL (SELECT dj.id AS d_id,
        convert_to(COALESCE(dj.result::text, 'null'), 'UTF8') AS d_res, dj.finished_at AS d_fin,
        dj.duration_ms AS d_dur,
        GREATEST(r.dedup_until, dj.finished_at + dj.result_ttl_us * interval '1 microsecond') AS d_exp
    FROM {schema}.jobs dj WHERE dj.id = r.job_id AND ` + derivedCond + `) d ON true`

	// recordReadCols is recordCols for reads of records r joined by
	// derivedJoin (with $3 = now): a completion left in the job row reads
	// as written (derivedJoin); a record without an expiry (its job, with
	// a dedup window of 0, is unfinished) reads with a projected one — the
	// job's earliest finish (now, its run_at or its lease's end, whichever
	// is latest) plus its result TTL; a lease record without a job, the end
	// of its lease. And a record in progress whose job is dead or cancelled,
	// or was deleted since (a DLQ delete: only finished jobs are deleted,
	// and a completed one has its completion written first) while no live
	// stored lease holds the record, reads 'failed' (store.RecordFailed). A
	// record in progress that stores
	// no lease while its job runs is leased by that job until its job lease
	// ends (see qRecordAcquireMany); while that lease is live the record is
	// live too (runHeldRead). A stored result past its own expiry
	// (result_expires_at, before the record's when the result TTL is
	// shorter than the window) reads as gone — no result, no size — whether
	// or not the expiry sweep has dropped its bytes yet; a derived result,
	// and one stored before migration 0023 (result_expires_at NULL),
	// expires with its record.
	recordReadCols = `r.tenant, r.key, CASE WHEN d.d_id IS NOT NULL THEN 'completed'
        WHEN r.status = 'in_progress' AND (EXISTS (SELECT 1 FROM {schema}.jobs fj
        WHERE fj.id = r.job_id AND fj.state IN ('dead', 'cancelled'))
        OR (COALESCE(r.job_id, 0) <> 0 AND NOT COALESCE(r.lease_owner <> '' AND r.lease_until > $3, false)
            AND NOT EXISTS (SELECT 1 FROM {schema}.jobs fj WHERE fj.id = r.job_id))) THEN 'failed' ELSE r.status END,
    r.fingerprint, COALESCE(r.job_id, 0), COALESCE(d.d_id, r.result_job_id, 0),
    CASE WHEN r.result_expires_at <= $3 THEN NULL ELSE COALESCE(d.d_res, r.result) END,
    CASE WHEN d.d_id IS NOT NULL THEN encode(sha256(d.d_res), 'hex') ELSE r.result_hash END,
    CASE WHEN r.result_expires_at <= $3 THEN 0 ELSE COALESCE(octet_length(d.d_res), r.size_bytes) END,
    r.compressed AND d.d_id IS NULL AND NOT COALESCE(r.result_expires_at <= $3, false),
    COALESCE(r.lease_owner, CASE WHEN r.status = 'in_progress' THEN (SELECT 'job:' || lj.id FROM {schema}.jobs lj
        WHERE lj.id = r.job_id AND lj.state = 'running') END, ''),
    CASE WHEN r.lease_owner IS NULL AND r.status = 'in_progress' THEN (SELECT lj.lease_expires_at FROM {schema}.jobs lj
        WHERE lj.id = r.job_id AND lj.state = 'running') ELSE r.lease_until END,
    r.created_at, COALESCE(d.d_fin, r.completed_at), r.dedup_until,
    COALESCE(d.d_exp, CASE WHEN r.expires_at > $3 OR NOT ` + runHeldRead + ` THEN r.expires_at END,
        (SELECT GREATEST($3::timestamptz, fj.run_at, fj.lease_expires_at) + fj.result_ttl_us * interval '1 microsecond'
         FROM {schema}.jobs fj WHERE fj.id = r.job_id),
        GREATEST($3::timestamptz, r.lease_until)), COALESCE(d.d_dur, r.duration_ms),
    COALESCE(d.d_exp, r.result_expires_at, CASE WHEN r.status = 'completed' THEN r.expires_at END)`

	qRecordGet = `SELECT ` + recordReadCols + ` FROM {schema}.records r ` + derivedJoin + `
WHERE ($1 = '' OR r.tenant = $1) AND r.key = $2 AND (COALESCE(d.d_exp, r.expires_at) IS NULL OR COALESCE(d.d_exp, r.expires_at) > $3
    OR ` + runHeldRead + ` OR ` + leaseHeldRead + `)
ORDER BY r.tenant LIMIT 1`

	// leaseHeldRead (qRecordGet) is true of a record in progress whose
	// stored lease lives by the database's clock ({db_now}): the lease
	// keeps it live whatever its stored expiry by a caller's clock that
	// runs ahead, as qRecordAcquireMany's acqExpired does, so the read of
	// the holder after a refused acquire finds it (it once found no row,
	// and the acquire failed with "no rows in result set" instead of
	// answering the key held). With the caller's clock ({db_now} is
	// '-infinity', which every lease end is after: hence the second test)
	// it is never true: the acquire then judges by the caller's clock too.
	leaseHeldRead = `(r.status = 'in_progress' AND r.lease_owner IS NOT NULL AND r.lease_until > {db_now}
        AND {db_now} > '-infinity'::timestamptz)`

	// runHeldRead (recordReadCols, qRecordGet; $3 = now) is true of a record
	// in progress with no stored lease whose job runs under a live job
	// lease (by the expiry clock): the job holds it, and it is live
	// whatever its stored expiry (a window that ended while the job ran);
	// it reads with the projected expiry of a window-0 record.
	runHeldRead = `(r.status = 'in_progress' AND r.lease_owner IS NULL AND EXISTS (SELECT 1 FROM {schema}.jobs rj
        WHERE rj.id = r.job_id AND rj.state = 'running' AND rj.lease_expires_at > GREATEST($3::timestamptz, {db_now})))`

	// qRecordDelete deletes the record ($1, $2) unless its lease is live by
	// the expiry clock ($3: the caller's now under Config.CallerClock, else
	// NULL, the database's), as an acquirer of another owner would judge
	// it (recordAcquireConflict): a stored lease that has not ended, or, for
	// a record in progress that stores none, the live job lease of the
	// running job it names. That job is locked FOR SHARE first (held, lk,
	// as in qRecordAcquireMany): its latest version decides, and a claim of
	// it (SKIP LOCKED) waits for this statement. It returns whether it
	// deleted and, when not, whether the record (its latest version, locked)
	// exists: a refused delete (ErrKeyInProgress) or a missing record.
	qRecordDelete = `WITH held AS (
    SELECT r.job_id FROM {schema}.records r WHERE r.tenant = $1 AND r.key = $2
        AND r.lease_owner IS NULL AND r.status = 'in_progress' AND r.job_id IS NOT NULL
), lk AS (
    SELECT hj.id, hj.state, hj.lease_expires_at FROM {schema}.jobs hj
    WHERE hj.id = ANY (ARRAY(SELECT held.job_id FROM held)) ORDER BY hj.id FOR SHARE
), lr AS (
    SELECT r.tenant, r.key,
        (r.status = 'in_progress' AND r.lease_owner IS NOT NULL AND r.lease_until > COALESCE($3::timestamptz, now()))
        OR (r.status = 'in_progress' AND r.lease_owner IS NULL AND r.job_id IS NOT NULL
            AND (r.job_id NOT IN (SELECT held.job_id FROM held)
                 OR EXISTS (SELECT 1 FROM lk WHERE lk.id = r.job_id AND lk.state = 'running'
                            AND lk.lease_expires_at > COALESCE($3::timestamptz, now())))) AS leased
    FROM {schema}.records r WHERE r.tenant = $1 AND r.key = $2 AND (SELECT count(*) FROM lk) >= 0
    FOR UPDATE
), d AS (
    DELETE FROM {schema}.records r USING lr
    WHERE r.tenant = lr.tenant AND r.key = lr.key AND NOT lr.leased
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM d), EXISTS (SELECT 1 FROM lr)`

	// leaseShiftAcquire and leaseShiftRenew are leaseShift (pgstore.go) of
	// qRecordAcquireMany's now ($6) and qRecordRenew's ($5): a record lease
	// lasts its length by the expiry clock at least.
	leaseShiftAcquire = `(greatest($6::timestamptz, {db_now}) - $6::timestamptz)`
	leaseShiftRenew   = `(greatest($5::timestamptz, {db_now}) - $5::timestamptz)`

	// qRecordAcquireMany takes the execution leases of distinct keys in one
	// statement ($1 tenants, $2 keys, $3 job ids, $4 owners, $5 lease ends,
	// $7 dedup ends, $8 expiries; $6 now and $9 the expiry clock shared);
	// it returns the records it acquired. A job whose key's record is its
	// own (the record names it, is in progress and live, stores no lease,
	// and the job runs under a live job lease) holds the lease by its job
	// lease already: own reads the record and nothing is written. The other
	// keys are upserted in (tenant, key) order, so two statements never lock
	// keys in opposite orders: byte order (COLLATE "C"), the order in which
	// the insert paths lock records (Go's, through qInsertFast's rank and the
	// keyed COPY) — a database collating by language would otherwise sort
	// "a1" before "B1" here and after it there, and deadlock
	// (TestKeyLockOrderUnderLanguageCollation).
	//
	// A record that stores no lease is held by its running job (a derived
	// lease, read as in recordReadCols). An acquirer of another owner must
	// see that job's current state, not its snapshot's: held locks the jobs
	// the records name FOR SHARE first (the InitPlan on the INSERT's SELECT
	// runs before any record is locked, so jobs are locked before records
	// as everywhere else). A claim of such a job (SKIP LOCKED) then waits
	// for this statement's commit, whose record write its own read then
	// sees; a claim committed before shows here as running. A record whose
	// job changed since the snapshot (not in held) is refused: the caller
	// reads the holder and tries later. Every lookup is by primary key
	// (LATERAL … LIMIT 1, = ANY(ARRAY(…))): a generic plan must not join
	// against a scan of the running jobs, whose partial indexes hold an
	// entry for every job that ran since the last vacuum.
	qRecordAcquireMany = `WITH i AS (
    SELECT i.tenant, i.key, i.job_id, i.owner, i.lease_until + ` + leaseShiftAcquire + ` AS lease_until,
        i.dedup_until, i.expires_at
    FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $7::timestamptz[], $8::timestamptz[])
        AS i(tenant, key, job_id, owner, lease_until, dedup_until, expires_at)
), own AS (
    SELECT r.tenant, r.key, r.status, r.fingerprint, r.job_id, COALESCE(r.result_job_id, 0), r.result,
        r.result_hash, r.size_bytes, r.compressed, 'job:' || oj.id, oj.lease_expires_at, r.created_at,
        r.completed_at, r.dedup_until, r.expires_at, r.duration_ms, r.result_expires_at
    FROM i
    JOIN LATERAL (SELECT * FROM {schema}.records r WHERE r.tenant = i.tenant AND r.key = i.key
        AND r.job_id = i.job_id AND r.status = 'in_progress' AND r.lease_owner IS NULL
        AND (r.expires_at IS NULL OR r.expires_at > $6) LIMIT 1) r ON true
    JOIN LATERAL (SELECT oj.id, oj.state, oj.lease_expires_at FROM {schema}.jobs oj WHERE oj.id = i.job_id LIMIT 1) oj ON true
    WHERE i.job_id <> 0 AND oj.state = 'running' AND oj.lease_expires_at > COALESCE($9::timestamptz, now())
), held AS (
    SELECT r.job_id FROM i
    JOIN LATERAL (SELECT r.job_id FROM {schema}.records r WHERE r.tenant = i.tenant AND r.key = i.key
        AND r.lease_owner IS NULL AND r.status = 'in_progress' AND r.job_id IS NOT NULL LIMIT 1) r ON true
), lk AS (
    SELECT hj.id, hj.state, hj.lease_expires_at, hj.was_cached, hj.finished_at, hj.result_ttl_us,
        hj.tenant, hj.idempotency_key, hj.created_at, hj.dedup_window_us
    FROM {schema}.jobs hj
    WHERE hj.id = ANY (ARRAY(SELECT held.job_id FROM held)) ORDER BY hj.id FOR SHARE
), ins AS (
    INSERT INTO {schema}.records AS r
        (tenant, key, status, job_id, lease_owner, lease_until, created_at, dedup_until, expires_at)
    SELECT i.tenant, i.key, 'in_progress', NULLIF(i.job_id, 0), i.owner, i.lease_until, $6::timestamptz, i.dedup_until,
        CASE WHEN i.expires_at < i.lease_until THEN i.lease_until ELSE i.expires_at END
    FROM i
    WHERE NOT EXISTS (SELECT 1 FROM own WHERE own.tenant = i.tenant AND own.key = i.key)
      AND (SELECT count(*) FROM lk) >= 0
    ORDER BY i.tenant COLLATE "C", i.key COLLATE "C"
    ` + recordAcquireConflict + `
    RETURNING ` + recordCols + `
)
SELECT * FROM own UNION ALL SELECT * FROM ins`

	// qRecordAcquireOwn is qRecordAcquireMany's own CTE alone: the records
	// in progress that name the running job that asks for them (the job's
	// row holds the lease, nothing is written). A claim reports most such
	// keys itself (claimCTEs' key_held), whose attempts then do not ask;
	// for the others acquireSet runs this read first and the full
	// statement only for the keys it did not return.
	qRecordAcquireOwn = `SELECT r.tenant, r.key, r.status, r.fingerprint, r.job_id, COALESCE(r.result_job_id, 0), r.result,
    r.result_hash, r.size_bytes, r.compressed, 'job:' || oj.id, oj.lease_expires_at, r.created_at,
    r.completed_at, r.dedup_until, r.expires_at, r.duration_ms, r.result_expires_at
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS i(tenant, key, job_id)
JOIN LATERAL (SELECT * FROM {schema}.records r WHERE r.tenant = i.tenant AND r.key = i.key
    AND r.job_id = i.job_id AND r.status = 'in_progress' AND r.lease_owner IS NULL
    AND (r.expires_at IS NULL OR r.expires_at > $4) LIMIT 1) r ON true
JOIN LATERAL (SELECT oj.id, oj.state, oj.lease_expires_at FROM {schema}.jobs oj WHERE oj.id = i.job_id LIMIT 1) oj ON true
WHERE oj.state = 'running' AND oj.lease_expires_at > COALESCE($5::timestamptz, now())`

	// recordAcquireConflict takes the lease of an existing record when it is
	// expired (a fresh start), or in progress with no live lease or with
	// this owner's, not held by its running job and not completed by it
	// (lk, above; a completion derived from the job row, derivedJoin); $6
	// is now, $9 the expiry clock. A stored lease keeps its record live
	// until the lease ends at least, whatever the TTL (as the insert above
	// does): a lease without a job (Do, result leases, the middleware), and
	// a job's (its key's record had expired, and the executor asks for an
	// expiry of now + the result TTL, which may come before the job's first
	// heartbeat; heartbeats then move both: qHeartbeat). A record
	// whose stored result expired while the record lives on for its window
	// (acqDrop) is taken as one without a result, keeping its key's
	// fingerprint, job and window.
	recordAcquireConflict = `ON CONFLICT (tenant, key) DO UPDATE SET
    lease_owner   = excluded.lease_owner,
    lease_until   = excluded.lease_until,
    status        = CASE WHEN ` + acqDrop + ` THEN 'in_progress' ELSE r.status END,
    fingerprint   = CASE WHEN ` + acqExpired + ` THEN '' ELSE r.fingerprint END,
    job_id        = CASE WHEN ` + acqExpired + ` THEN excluded.job_id ELSE COALESCE(r.job_id, excluded.job_id) END,
    result        = CASE WHEN ` + acqDrop + ` THEN NULL ELSE r.result END,
    result_job_id = CASE WHEN ` + acqDrop + ` THEN NULL ELSE r.result_job_id END,
    result_hash   = CASE WHEN ` + acqDrop + ` THEN '' ELSE r.result_hash END,
    size_bytes    = CASE WHEN ` + acqDrop + ` THEN 0 ELSE r.size_bytes END,
    compressed    = CASE WHEN ` + acqDrop + ` THEN false ELSE r.compressed END,
    completed_at  = CASE WHEN ` + acqDrop + ` THEN NULL ELSE r.completed_at END,
    duration_ms   = CASE WHEN ` + acqDrop + ` THEN 0 ELSE r.duration_ms END,
    created_at    = CASE WHEN ` + acqDrop + ` THEN excluded.created_at ELSE r.created_at END,
    dedup_until   = CASE WHEN ` + acqExpired + ` THEN excluded.dedup_until ELSE r.dedup_until END,
    expires_at    = CASE WHEN ` + acqExpired + ` THEN excluded.expires_at
                         WHEN r.expires_at < excluded.lease_until THEN excluded.lease_until
                         ELSE r.expires_at END,
    result_expires_at = CASE WHEN ` + acqDrop + ` THEN NULL ELSE r.result_expires_at END
WHERE ` + acqDrop + `
   OR (r.status = 'in_progress'
       AND (r.lease_owner IS NULL OR r.lease_until <= COALESCE($9::timestamptz, now())
            OR r.lease_owner = excluded.lease_owner)
       AND NOT (r.lease_owner IS NULL AND r.job_id IS NOT NULL
                AND (r.job_id NOT IN (SELECT held.job_id FROM held)
                     OR EXISTS (SELECT 1 FROM lk dj WHERE dj.id = r.job_id AND ` + derivedCond + `)
                     OR (r.job_id IS DISTINCT FROM excluded.job_id
                         AND r.job_id IN (SELECT lk.id FROM lk WHERE lk.state = 'running'
                                          AND lk.lease_expires_at > COALESCE($9::timestamptz, now()))))))`

	// acqDrop (recordAcquireConflict) is true of a record whose result is
	// not kept: the record expired (acqExpired) or its stored result did
	// (a result TTL shorter than the window). It is taken as in progress,
	// created now (so it never reads as its job's completion again).
	acqDrop = `(` + acqExpired + ` OR (r.status = 'completed' AND r.result_expires_at <= $6))`

	// acqExpired (recordAcquireConflict) is true of a record expired at $6:
	// by its stored expiry, or, for a record in progress with no stored
	// lease that names a job (the acquirer's own included: a stale attempt
	// of a job another attempt completed), by that job's row, locked in lk:
	// a completion read from it (derivedJoin) expires at the later of its
	// window and the result's expiry; a job deleted since (in held, not in
	// lk) leaves the stored expiry. A record that was not such a record in
	// the snapshot (not in held) changed since and is not expired here (the
	// clause then refuses it, and the caller reads the holder). Nor is a
	// record held by another running job it names under a live job lease
	// (lk, at the expiry clock $9), whatever its stored expiry: its window
	// ended while that job ran (the clause then refuses it). The
	// acquirer's own job is no such holder: its record past the stored
	// expiry is started afresh, with a stored lease, as before. Nor is a
	// record whose stored lease, another owner's (Do, result leases, the
	// middleware, or a job's stored lease), lives by the expiry clock: a
	// lease record without a job expires no earlier than its lease, but by
	// the caller's clock, which may run ahead (the clause then refuses it,
	// as a live lease).
	acqExpired = `(CASE WHEN r.status = 'in_progress' AND r.lease_owner IS NULL AND r.job_id IS NOT NULL
        THEN CASE WHEN NOT EXISTS (SELECT 1 FROM held WHERE held.job_id = r.job_id) THEN NULL
             WHEN r.job_id IS DISTINCT FROM excluded.job_id
                  AND r.job_id IN (SELECT lk.id FROM lk WHERE lk.state = 'running'
                                   AND lk.lease_expires_at > COALESCE($9::timestamptz, now()))
             THEN NULL
             ELSE COALESCE((SELECT GREATEST(r.dedup_until, dj.finished_at + dj.result_ttl_us * interval '1 microsecond')
                            FROM lk dj WHERE dj.id = r.job_id AND ` + derivedCond + `),
                           r.expires_at) END
        WHEN r.lease_owner IS NOT NULL AND r.lease_owner IS DISTINCT FROM excluded.lease_owner
             AND r.lease_until > COALESCE($9::timestamptz, now()) THEN NULL
        ELSE r.expires_at END <= $6)`

	// qRecordComplete stores the result of a record whose lease owner $3
	// still holds: in progress, live at $8 and storing that owner's lease
	// (store.Records.RecordComplete, as qRecordRenew); a record that
	// expired while nobody took it over is no longer held.
	qRecordComplete = `UPDATE {schema}.records SET
    status = 'completed', result = $4, compressed = $5, result_hash = $6, size_bytes = length($4::bytea),
    completed_at = $8, expires_at = GREATEST(dedup_until, $8::timestamptz + $7::bigint * interval '1 microsecond'),
    result_expires_at = $8::timestamptz + $7::bigint * interval '1 microsecond',
    lease_owner = NULL, lease_until = NULL, duration_ms = $9
WHERE tenant = $1 AND key = $2 AND lease_owner = $3 AND status = 'in_progress'
  AND (expires_at IS NULL OR expires_at > $8)`

	// qRecordRelease clears the lease of owner $3 on ($1, $2), unless job
	// $4 (0: none) runs under a lease token other than $5: a later run of
	// that job holds the key under the same owner name. The job row is
	// locked FOR SHARE first (jobs before records, as everywhere): a claim
	// of the job under way is waited for and seen, and one that has not
	// started skips the job (SKIP LOCKED) until this release committed, so
	// its key step comes after it.
	qRecordRelease = `WITH run AS (
    SELECT state, lease_token FROM {schema}.jobs WHERE id = $4 FOR SHARE
)
UPDATE {schema}.records SET lease_owner = NULL, lease_until = NULL
WHERE tenant = $1 AND key = $2 AND lease_owner = $3
  AND NOT EXISTS (SELECT 1 FROM run WHERE run.state = 'running' AND run.lease_token <> $5)`

	// qRecordForget deletes the in-progress record of no job whose lease
	// $3 holds (store.RecordReleaseParams.Forget).
	qRecordForget = `DELETE FROM {schema}.records
WHERE tenant = $1 AND key = $2 AND lease_owner = $3 AND status = 'in_progress' AND job_id IS NULL`

	// qRecordRenew moves the lease end of a record whose lease owner $3
	// still holds ($4 the new end, $5 now): in progress, live, and storing
	// that owner's lease (store.Records.RecordRenew); the record lives
	// until the new end at least.
	qRecordRenew = `UPDATE {schema}.records SET lease_until = $4::timestamptz + ` + leaseShiftRenew + `,
    expires_at = CASE WHEN expires_at < $4::timestamptz + ` + leaseShiftRenew + `
                      THEN $4::timestamptz + ` + leaseShiftRenew + ` ELSE expires_at END
WHERE tenant = $1 AND key = $2 AND lease_owner = $3 AND status = 'in_progress'
  AND (expires_at IS NULL OR expires_at > $5)
RETURNING lease_until`

	// qRecordStats counts records as qRecordGet reads them. A cached
	// result counts (completed, size, and by its own expiry in the next
	// 24 h) while it lives; past its expiry it is expired while its bytes
	// await the sweep (qDropExpiredResults), even though its record lives
	// on for its window.
	qRecordStats = `SELECT
    count(*) FILTER (WHERE expires_at IS NULL OR expires_at > $2),
    count(*) FILTER (WHERE (expires_at IS NULL OR expires_at > $2) AND status = 'in_progress' AND NOT failed),
    count(*) FILTER (WHERE (expires_at IS NULL OR expires_at > $2)
        AND CASE WHEN live_result THEN result_until ELSE expires_at END > $2
        AND CASE WHEN live_result THEN result_until ELSE expires_at END <= $2::timestamptz + interval '24 hours'),
    count(*) FILTER (WHERE expires_at <= $2 OR (has_result AND result_until <= $2)),
    COALESCE(sum(size_bytes) FILTER (WHERE (expires_at IS NULL OR expires_at > $2)
        AND NOT COALESCE(result_until <= $2, false)), 0)::bigint,
    count(*) FILTER (WHERE (expires_at IS NULL OR expires_at > $2) AND live_result),
    count(*) FILTER (WHERE (expires_at IS NULL OR expires_at > $2) AND status = 'in_progress' AND failed)
FROM (SELECT *, status = 'completed' AND COALESCE(result_until > $2, true) AS live_result
FROM (SELECT COALESCE(d.d_exp, CASE WHEN r.expires_at > $2 OR NOT (r.status = 'in_progress'
            AND r.lease_owner IS NULL AND EXISTS (SELECT 1 FROM {schema}.jobs rj WHERE rj.id = r.job_id
            AND rj.state = 'running' AND rj.lease_expires_at > GREATEST($2::timestamptz, {db_now}))) THEN r.expires_at END,
        (SELECT GREATEST($2::timestamptz, fj.run_at, fj.lease_expires_at) + fj.result_ttl_us * interval '1 microsecond'
         FROM {schema}.jobs fj WHERE fj.id = r.job_id AND r.expires_at IS NOT NULL)) AS expires_at, CASE WHEN d.d_id IS NOT NULL THEN 'completed' ELSE r.status END AS status,
        COALESCE(octet_length(d.d_res), r.size_bytes) AS size_bytes,
        r.status = 'in_progress' AND (EXISTS (SELECT 1 FROM {schema}.jobs fj
        WHERE fj.id = r.job_id AND fj.state IN ('dead', 'cancelled'))
        OR (COALESCE(r.job_id, 0) <> 0 AND NOT COALESCE(r.lease_owner <> '' AND r.lease_until > $2, false)
            AND NOT EXISTS (SELECT 1 FROM {schema}.jobs fj WHERE fj.id = r.job_id))) AS failed,
        r.result IS NOT NULL AS has_result, COALESCE(d.d_exp, r.result_expires_at, r.expires_at) AS result_until
    FROM {schema}.records r ` + derivedJoin + ` WHERE ($1 = '' OR r.tenant = $1)) k) kr`
)
