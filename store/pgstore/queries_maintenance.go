package pgstore

// The statements of maintenance: the rescue of running jobs whose lease
// ended, the release of running jobs at shutdown, the promotion of due
// jobs, retention and the expiry sweeps of records (queries.go holds the
// rest, the end of cancels' holds included).

// Maintenance.
const (
	// qRescue takes the running jobs whose lease expired by the expiry
	// clock $4 (NULL: the database's now()); $1 is the caller's Now, the
	// time written into the rows. It returns each job as it left it
	// (store.RescuedJob's columns).
	qRescue = `WITH cand AS (
    SELECT id FROM {schema}.jobs
    WHERE state = 'running' AND lease_expires_at < coalesce($4::timestamptz, now())
    ORDER BY lease_expires_at, id LIMIT $2
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE {schema}.jobs j SET
        state = CASE WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'retryable' END,
        run_at = $1,
        finished_at = CASE WHEN j.attempt >= j.max_attempts THEN $1::timestamptz END,
        last_error = $3,
        lease_expires_at = NULL
    FROM cand WHERE j.id = cand.id
    RETURNING j.id, j.state, j.tenant, j.queue, j.kind, j.last_error, j.attempt, j.started_at, j.worker_id
), att AS (
    INSERT INTO {schema}.attempts (job_id, attempt, started_at, finished_at, duration_ms, outcome, error, worker_id)
    SELECT id, attempt, started_at, $1,
        greatest((extract(epoch FROM $1::timestamptz - started_at) * 1000)::bigint, 0), 'lost', last_error, worker_id
    FROM upd WHERE started_at IS NOT NULL ORDER BY id
)
SELECT id, state, tenant, queue, kind, attempt FROM upd`

	// qRelease gives back the jobs of leases ($1 ids, $2 tokens) and the
	// jobs running under claim token $4 (none when ""; read through
	// jobs_lease_idx, which holds exactly the running jobs).
	qRelease = `WITH u AS (
    SELECT * FROM unnest($1::bigint[], $2::text[]) AS u(id, token)
    UNION ALL
    SELECT r.id, r.lease_token FROM {schema}.jobs r WHERE $4::text <> '' AND r.state = 'running' AND r.lease_token = $4
), upd AS (
    UPDATE {schema}.jobs j SET state = 'available', run_at = $3, attempt = greatest(j.attempt - 1, 0),
        lease_token = '', lease_expires_at = NULL
    FROM u WHERE j.id = u.id AND j.lease_token = u.token AND j.state = 'running'
    RETURNING j.id, j.queue, j.attempt + 1 AS attempt, j.started_at, j.worker_id
), att AS (
    INSERT INTO {schema}.attempts (job_id, attempt, started_at, finished_at, duration_ms, outcome, worker_id)
    SELECT id, attempt, started_at, $3,
        greatest((extract(epoch FROM $3::timestamptz - started_at) * 1000)::bigint, 0), 'released', worker_id
    FROM upd WHERE started_at IS NOT NULL ORDER BY id
)
SELECT id, queue FROM upd`

	// qPromote makes the due scheduled and retryable jobs available, up
	// to $2 in all, the earliest run_at first whatever their queues
	// (store.Maintenance; a queue with a backlog of due jobs no worker
	// claims does not keep the promoter from the others'): a skip scan
	// of jobs_due_idx (queue, run_at, id) lists the queues that have such
	// jobs, one index probe each; each queue's first $2 due jobs are one
	// range that ends at its first job not yet due (migration 0031), so
	// the jobs scheduled for later are never read; the earliest $2 of
	// those are locked one by one by their whole key (SKIP LOCKED: a
	// claim promoting them takes them; one promoted, cancelled or
	// rescheduled since the snapshot fails the re-check; by id alone the
	// planner read jobs_due_idx from its start for each) and made
	// available, found by primary key (= ANY), as the claim's are.
	// Locking in each queue's range instead took $2 jobs of every queue.
	qPromote = `WITH RECURSIVE qs(queue) AS (
    SELECT (SELECT j.queue FROM {schema}.jobs j WHERE j.state IN ('scheduled', 'retryable')
        ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {schema}.jobs j WHERE j.state IN ('scheduled', 'retryable') AND j.queue > qs.queue
        ORDER BY j.queue LIMIT 1)
    FROM qs WHERE qs.queue IS NOT NULL
), due AS (
    SELECT qs.queue, c.run_at, c.id FROM qs
    CROSS JOIN LATERAL (
        SELECT j.id, j.run_at FROM {schema}.jobs j
        WHERE j.queue = qs.queue AND j.state IN ('scheduled', 'retryable') AND j.run_at <= $1
        ORDER BY j.run_at, j.id LIMIT $2
    ) c
    WHERE qs.queue IS NOT NULL
    ORDER BY c.run_at, c.id LIMIT $2
), cand AS (
    SELECT c.id FROM due d
    CROSS JOIN LATERAL (
        SELECT j.id FROM {schema}.jobs j
        WHERE j.queue = d.queue AND j.run_at = d.run_at AND j.id = d.id AND j.state IN ('scheduled', 'retryable')
        FOR UPDATE OF j SKIP LOCKED
    ) c
)
UPDATE {schema}.jobs j SET state = 'available' WHERE j.id = ANY(ARRAY(SELECT id FROM cand))
RETURNING j.queue`

	// retentionNow is when qDeleteFinished finds a job's record expired:
	// the leader's now ($4), but never later than the expiry clock ($6,
	// NULL for the database's now()), as sweepNow: a leader whose clock
	// runs ahead does not delete a job its live record names.
	retentionNow = `LEAST($4::timestamptz, COALESCE($6::timestamptz, now()))`

	// qDeleteFinished deletes the finished jobs past their retention. A
	// cancelled job that still holds its lease (qJobCancel) is kept: its
	// handler may still run, and deleting the row would free its slot and
	// partition. A job its record names while the record's window is open
	// is kept too. A completed job whose record reads its completion from
	// the job row (derivedJoin) and whose result still lives gets it written
	// into the record first (m, as qJobDelete does), so the record serves the
	// result until its expiry without the job (before, retention passed over
	// such a job until its result expired, up to an hour past its window,
	// where SQLite deleted it). cand locks the jobs first; m then locks their
	// records (jobs before records, as everywhere).
	qDeleteFinished = `WITH cand AS (
    SELECT j.id FROM {schema}.jobs j
    WHERE ((j.state = 'completed' AND j.finished_at < $1)
        OR (j.state = 'cancelled' AND j.finished_at < $2 AND j.lease_expires_at IS NULL)
        OR (j.state = 'dead' AND j.finished_at < $3))
      AND (j.idempotency_key = '' OR NOT EXISTS (SELECT 1 FROM {schema}.records r
          WHERE r.tenant = j.tenant AND r.key = j.idempotency_key AND r.job_id = j.id
            AND (r.dedup_until IS NULL OR r.dedup_until > ` + retentionNow + `)
            AND (r.expires_at IS NULL OR r.expires_at > ` + retentionNow + `)))
    LIMIT $5
    FOR UPDATE SKIP LOCKED
), m AS (
    UPDATE {schema}.records r SET ` + derivedWrite + `
    FROM (SELECT j.*, convert_to(COALESCE(j.result::text, 'null'), 'UTF8') AS d_res
        FROM {schema}.jobs j WHERE j.id IN (SELECT cand.id FROM cand)
          AND j.state = 'completed' AND NOT j.was_cached AND j.idempotency_key <> '') dj
    WHERE r.tenant = dj.tenant AND r.key = dj.idempotency_key AND ` + derivedCond + `
      AND dj.finished_at + dj.result_ttl_us * interval '1 microsecond' > ` + retentionNow + `
), a AS (
    DELETE FROM {schema}.attempts a USING cand WHERE a.job_id = cand.id
)
DELETE FROM {schema}.jobs j USING cand WHERE j.id = cand.id`

	// sweepNow is the time at which the expiry sweeps (qDropExpiredResults,
	// qDeleteExpiredRecords) find records and results expired: the
	// caller's now ($1), but never later than the expiry clock ($3, NULL
	// for the database's now()), so a maintenance leader whose clock runs
	// ahead does not delete records (dedup windows, cached results) that
	// still live for every other node.
	sweepNow = `LEAST($1::timestamptz, COALESCE($3::timestamptz, now()))`

	// qDropExpiredResults drops the bytes of up to $2 stored results
	// expired at sweepNow whose records live on for their dedup window (a result
	// TTL shorter than the window): the record keeps its status,
	// completion time and hash and reads without a result (recordReadCols).
	// It locks records only (SKIP LOCKED): it never waits, and never holds
	// a record a finish is about to lock after its job. It reads
	// records_result_expires_idx, which holds only the records that outlive
	// their result (the others go whole, qDeleteExpiredRecords).
	qDropExpiredResults = `UPDATE {schema}.records r SET result = NULL, size_bytes = 0, compressed = false
FROM (SELECT c.tenant, c.key FROM {schema}.records c WHERE c.result_expires_at <= ` + sweepNow + ` AND c.result IS NOT NULL
          AND (c.expires_at IS NULL OR c.result_expires_at < c.expires_at)
      LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE r.tenant = c.tenant AND r.key = c.key`

	// qDeleteExpiredRecords deletes up to $2 records expired at sweepNow. The
	// stored expiry of a record whose completion is read from its job row
	// is a lower bound, by at most an hour (derivedJoin, qCompleteRecords):
	// such a record is passed over until its result expires too. cand locks
	// the expired records (SKIP LOCKED, so a locked one does not take a
	// place in the batch) and returns their latest versions, passing over
	// those whose job still holds a live result in the snapshot (a probe by
	// primary key per record); the jobs that the remaining records in
	// progress without a stored lease name are then locked FOR SHARE SKIP
	// LOCKED (lk), which returns their latest rows: a completion committed
	// after the snapshot leaves no write on the record for its lock to see.
	// Such a record is deleted only if its job was locked here and holds no
	// live result, or is gone: absent from the snapshot, which named it
	// already (sv; a job the record came to name after the snapshot, a
	// reopen from a caller whose clock lags, is not in it either). A record
	// whose job another transaction holds, or that changed, is left to the
	// next pass. A record in progress with no stored lease whose job runs
	// under a live job lease (by the expiry clock $3) is not expired,
	// whatever its stored expiry (its window ended while the job ran): cand
	// passes over those running in the snapshot, and the delete keeps those
	// lk shows running (a claim committed since). Nor is a record whose
	// stored lease lives by the expiry clock (Do, result leases, the
	// middleware, a job's stored lease): one without a job expires no
	// earlier than its lease (recordAcquireConflict), by the caller's
	// clock, which may run ahead.
	// Nothing here waits for a lock, so the records locked before the jobs
	// cannot deadlock with a finish (which locks the job, then the record).
	qDeleteExpiredRecords = `WITH cand AS (
    SELECT r.tenant, r.key, r.job_id,
        r.status = 'in_progress' AND r.lease_owner IS NULL AND r.job_id IS NOT NULL AS bare
    FROM {schema}.records r
    LEFT JOIN LATERAL (SELECT 1 AS live FROM {schema}.jobs dj
        WHERE dj.id = r.job_id AND ` + derivedCond + `
          AND dj.finished_at + dj.result_ttl_us * interval '1 microsecond' > ` + sweepNow + ` LIMIT 1) d ON true
    WHERE r.expires_at <= ` + sweepNow + ` AND d.live IS NULL
      AND NOT (r.status = 'in_progress' AND r.lease_owner IS NULL AND r.job_id IS NOT NULL
               AND EXISTS (SELECT 1 FROM {schema}.jobs rj WHERE rj.id = r.job_id AND rj.state = 'running'
                           AND rj.lease_expires_at > COALESCE($3::timestamptz, now())))
      AND NOT (r.lease_owner IS NOT NULL AND r.lease_until > COALESCE($3::timestamptz, now()))
    LIMIT $2 FOR UPDATE OF r SKIP LOCKED
), sv AS (
    SELECT v.tenant, v.key, v.job_id FROM {schema}.records v
    WHERE (v.tenant, v.key) IN (SELECT cand.tenant, cand.key FROM cand WHERE cand.bare)
), ex AS (
    SELECT j.id FROM {schema}.jobs j WHERE j.id = ANY (ARRAY(SELECT cand.job_id FROM cand WHERE cand.bare))
), lk AS (
    SELECT j.id, j.state, j.was_cached, j.finished_at, j.result_ttl_us, j.tenant, j.idempotency_key,
        j.created_at, j.dedup_window_us, j.lease_expires_at
    FROM {schema}.jobs j WHERE j.id = ANY (ARRAY(SELECT ex.id FROM ex)) FOR SHARE SKIP LOCKED
)
DELETE FROM {schema}.records r USING cand
WHERE r.tenant = cand.tenant AND r.key = cand.key
  AND NOT (cand.bare AND CASE WHEN cand.job_id IN (SELECT ex.id FROM ex)
                              THEN COALESCE((SELECT COALESCE(` + derivedCond + `
                                        AND dj.finished_at + dj.result_ttl_us * interval '1 microsecond' > ` + sweepNow + `, false)
                                        OR (dj.state = 'running'
                                            AND dj.lease_expires_at > COALESCE($3::timestamptz, now()))
                                             FROM lk dj WHERE dj.id = cand.job_id), true)
                              ELSE NOT EXISTS (SELECT 1 FROM sv WHERE sv.tenant = cand.tenant
                                               AND sv.key = cand.key AND sv.job_id = cand.job_id) END)`
)

// The repair of pending dependants whose release was missed
// (JobDependantsRepair).
const (
	// qRepairCandidates reads, without locking, the pending jobs created
	// before $1, after the cursor ($2 created_at, $3 id), up to $4, and
	// whether their dependencies are settled (sqlRetryDepState not
	// 'pending': released or cancelled by the finish that settled the
	// last one, so pending only if that finish missed it). It reads the
	// partial index jobs_pending_idx (pending jobs only, by created_at)
	// from the cursor on, so a call reads about $4 entries and their
	// dependencies by primary key, never the finished history
	// (plan_test.go), and writes nothing when nothing is to repair.
	qRepairCandidates = `SELECT j.id, j.created_at, coalesce(` + sqlRetryDepState + ` <> 'pending', true)
FROM (SELECT id, created_at, deps_any, depends_on FROM {schema}.jobs
    WHERE state = 'pending' AND created_at < $1 AND created_at >= $2 AND (created_at > $2 OR id > $3)
    ORDER BY created_at, id LIMIT $4) j
ORDER BY j.created_at, j.id`

	// qRepairLock locks the jobs of $1 still pending, in id order,
	// skipping those a finish (or another repair) has locked: that finish
	// decides them.
	qRepairLock = `SELECT id FROM {schema}.jobs WHERE id = ANY($1::bigint[]) AND state = 'pending'
ORDER BY id FOR UPDATE SKIP LOCKED`

	// qRepairCancel cancels at $2 the locked pending jobs of $1 that wait
	// for their dependencies to complete and have a dead or cancelled one
	// (sqlRetryDepState), naming it (sqlDepCancelReason) as a cancel of
	// their dependency would (qCancelDependants). Their records and their
	// own dependants are then handled as a cancel's (afterFinal).
	qRepairCancel = `UPDATE {schema}.jobs j SET state = 'cancelled', finished_at = $2,
    last_error = ` + sqlDepCancelReason + `
WHERE j.id = ANY($1::bigint[]) AND j.state = 'pending' AND ` + sqlRetryDepState + ` = 'cancelled'
RETURNING j.id`
)
