package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Flow control: the flow_controls table (limits, pauses, rate windows) and
// the fair claim.
const (
	qFlowLoad = `SELECT tenant, queue, rate, period_us, concurrency, weight, paused, window_start, window_used, throttled, def_ver
FROM {schema}.flow_controls WHERE $1::text[] IS NULL OR queue = '' OR queue = ANY($1::text[])
ORDER BY tenant, queue`
	// qFlowLock locks the limit rows a claim spends from, in one order so
	// that claimers never deadlock.
	qFlowLock = `SELECT tenant, queue, rate, period_us, concurrency, weight, paused, window_start, window_used, throttled, def_ver
FROM {schema}.flow_controls WHERE (queue = '' OR queue = ANY($1::text[])) AND (rate > 0 OR concurrency > 0 OR paused)
ORDER BY tenant, queue FOR UPDATE`
	qLimitPut = `INSERT INTO {schema}.flow_controls AS f (tenant, queue, rate, period_us, concurrency, weight)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant, queue) DO UPDATE SET rate = $3, period_us = $4, concurrency = $5, weight = $6,
    window_start = CASE WHEN f.rate = $3 AND f.period_us = $4 THEN f.window_start ELSE 'epoch' END,
    window_used = CASE WHEN f.rate = $3 AND f.period_us = $4 THEN f.window_used ELSE 0 END`
	qLimitClear = `UPDATE {schema}.flow_controls SET rate = 0, period_us = 0, concurrency = 0, weight = 0, window_start = 'epoch', window_used = 0
WHERE tenant = $1 AND queue = $2 AND (rate > 0 OR concurrency > 0 OR weight > 0)`
	qFlowPrune = `DELETE FROM {schema}.flow_controls WHERE tenant = $1 AND queue = $2 AND rate = 0 AND concurrency = 0 AND weight = 0 AND NOT paused`
	qPause     = `INSERT INTO {schema}.flow_controls (tenant, queue, paused) VALUES ($1, $2, true)
ON CONFLICT (tenant, queue) DO UPDATE SET paused = true`
	qResume = `UPDATE {schema}.flow_controls SET paused = false WHERE tenant = $1 AND queue = $2`
	// qFlowUsage writes back every limit a claim spent from or was
	// throttled by, in one statement.
	qFlowUsage = `UPDATE {schema}.flow_controls f SET window_start = u.ws, window_used = u.used, throttled = f.throttled + u.thr
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::bigint[]) AS u(tenant, queue, ws, used, thr)
WHERE f.tenant = u.tenant AND f.queue = u.queue`

	// qDefaultWindows reads the tenants' current windows under the rate
	// limits of tenant '*' of queues $2 ($1 now); older windows count
	// nothing. A claim runs it after locking the '*' rows, so that it sees
	// every window written by the claims that held the lock before it.
	qDefaultWindows = `SELECT w.tenant, w.queue, w.window_start, w.window_used, w.throttled
FROM {schema}.flow_default_windows w JOIN {schema}.flow_controls f ON f.tenant = '*' AND f.queue = w.queue
WHERE f.rate > 0 AND w.window_start > $1::timestamptz - f.period_us * interval '1 microsecond'
    AND (w.queue = '' OR w.queue = ANY($2::text[]))`
	// qDefaultWindowsOf reads one tenant's windows under default limits.
	qDefaultWindowsOf = `SELECT tenant, queue, window_start, window_used, throttled FROM {schema}.flow_default_windows WHERE tenant = $1`
	// qDefaultUsage writes back the tenants' windows under default limits
	// a claim spent from or was throttled by.
	qDefaultUsage = `INSERT INTO {schema}.flow_default_windows AS w (tenant, queue, window_start, window_used, throttled)
SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::bigint[])
ON CONFLICT (queue, tenant) DO UPDATE SET window_start = excluded.window_start,
    window_used = excluded.window_used, throttled = w.throttled + excluded.throttled`
	// qDefaultReset forgets the windows of the default limit of queue $1
	// unless it keeps its rate $2 and period $3 (a changed rate starts a
	// new window, as for any limit).
	qDefaultReset = `DELETE FROM {schema}.flow_default_windows WHERE queue = $1 AND NOT EXISTS (
    SELECT 1 FROM {schema}.flow_controls WHERE tenant = '*' AND queue = $1 AND rate = $2 AND period_us = $3)`
)

// The counts of the jobs that take a slot of concurrency limits
// (sqlSlotTaken, a function of the count's now).
var (
	// qRunningScopes counts the jobs that take a slot of concurrency
	// limits at $1 (sqlSlotTaken) per (tenant, queue).
	qRunningScopes = `SELECT r.tenant, r.queue, count(*)::int FROM {schema}.jobs r WHERE ` + sqlSlotTaken("$1::timestamptz") + `
GROUP BY r.tenant, r.queue`
	// qRunningOfClaim counts the running jobs (sqlSlotTaken at $2) a claim
	// of queues $1 can be limited by: those of the queues, and those of
	// every queue of a tenant with a concurrency limit for every queue
	// (all of them under such a default limit).
	qRunningOfClaim = `SELECT r.tenant, r.queue, count(*)::int FROM {schema}.jobs r
WHERE ` + sqlSlotTaken("$2::timestamptz") + ` AND (r.queue = ANY($1::text[])
    OR r.tenant IN (SELECT tenant FROM {schema}.flow_controls WHERE queue = '' AND concurrency > 0)
    OR EXISTS (SELECT 1 FROM {schema}.flow_controls WHERE tenant = '*' AND queue = '' AND concurrency > 0))
GROUP BY r.tenant, r.queue`
)

var (
	// qConcLock takes the advisory locks (class $2, flowLockClass) of the
	// queue scopes of queues $1 and of every queue
	// that hold a concurrency limit (of the queue, a tenant or the default
	// tenant '*'), one per queue scope, in one order. Every claim that
	// counts running jobs under such a limit takes them first and holds
	// them to its commit, so the statement that counts (its own snapshot)
	// sees every job the claims before it started. An advisory lock rather
	// than the limit's row lock: a row lock writes the row (its xmax, and
	// WAL), which the reserved claim, whose only other write is the claimed
	// jobs, paid 50–100 µs for on every claim (pgbench: a transaction
	// updating 10 rows after taking the row lock, against one taking the
	// advisory lock). The locking claims take these before they lock the
	// limit rows; no path takes them after a row lock, so they add no
	// deadlock.
	qConcLock = concLocks(`SELECT queue FROM {schema}.flow_controls
        WHERE (queue = '' OR queue = ANY($1::text[])) AND concurrency > 0`)
	// qLockedSetup is the first statement of a locking claim's
	// transaction: JIT off (see claimOne), the lock of claim token $4
	// (class $3, claim_token_lock.go) and qConcLock.
	qLockedSetup = `SELECT set_config('jit', 'off', true), ` + tokenLock("$3", "$4") + `, ` + qConcLock
)

// qClaimFair claims, in queue $1, up to $3[i] jobs of tenant $2[i]:
// one ordered, SKIP LOCKED probe of jobs_claim_tenant_idx per tenant.
//
// Why it is correct under concurrency (READ COMMITTED):
//   - SKIP LOCKED: two claimers never lock the same row, and the UPDATE
//     only touches locked rows, so no job is returned twice. A row whose
//     state changed since the snapshot is re-checked by PostgreSQL
//     against the WHERE clause of the locking scan before it is locked.
//   - FIFO head rule: a job with a partition key is taken only when no
//     unfinished job of its (tenant, queue, partition_key) has a lower id
//     and no other job of it is running (a dead or cancelled head retried
//     while its successor runs waits for it: JobRetryMany), read from this
//     statement's snapshot. While the head runs, the successor
//     is not claimable. While the head's completion is uncommitted, the
//     snapshot still shows the head running, so the successor is not
//     claimable either: it becomes claimable only once the completion is
//     committed. Two claimers cannot both take a head (SKIP LOCKED), and
//     one claim cannot take a head and its successor together (the
//     successor sees the head unfinished in the same snapshot).
//   - Retried heads: a dead or cancelled job retried while a later job
//     of its partition is claimed or runs (JobRetryMany) is not taken
//     beside it: the retry waits for the locks of that partition's later
//     unfinished jobs (qRetryLockPartitions), so a claim of one of them
//     under way commits first and a claim whose snapshot follows the
//     retry sees it running. A claim whose snapshot predates the retry's
//     commit but that reaches a later job's row only after that commit
//     still reads the retried job as finished; but the retry wrote a new
//     version of every later job a claim could take, so locking the row
//     re-checks its latest version (EvalPlanQual), which is not the one
//     the snapshot shows, and the version check of the head rule
//     (tenantClaimProbe) skips it. Re-checking the head rule itself would
//     not do: the re-check runs its subqueries on the statement's
//     snapshot, which still shows the retried job finished
//     (TestRetriedHeadAgainstStaleClaim).
//   - Cancelled while running: a job cancelled while it ran holds its
//     partition (qJobCancel) until its worker's refused finish
//     acknowledges the cancel (qCancelAck) or the rescuer finds its lease
//     ended (qCancelHoldEnd); sqlPartitionTaken counts it as running. A
//     claim whose snapshot predates the cancel sees it running; one after
//     the cancel's commit sees the hold; one after the acknowledgement's
//     commit sees neither, as for a completion. A holding job retried
//     keeps its hold's end (qRetry) while it waits to run again: until
//     then it holds the partition against the earlier jobs that wait for
//     it too (the later-job probe reads that end), so no job of the
//     partition starts beside the cancelled handler.
//   - Lower ids committing late: inserts of one partition are serialised
//     by an advisory lock taken before ids are allocated (qLockPartitions),
//     so a job is never visible before a lower-id job of its partition.
//   - Dependencies: jobs waiting on dependencies are pending, which is
//     not a claimable state; finishes move them on.
//
// Each tenant of the queue is read by its own ordered scan of
// jobs_claim_tenant_idx (available jobs only since migration 0031: the claim
// promoted its queues' due jobs first, qClaimPromote), which stops after $5 unlocked
// rows; the head rule reads jobs_partition_idx (unfinished partition
// members, and cancelled ones still holding their partition: migration
// 0026) for lower ids, index only, and for a later running or holding job
// of the partition. Other finished jobs are never read. With several queues,
// up to $5 rows per queue are locked for the duration of the statement
// and only the best $5 are taken; the rest are skipped meanwhile by
// other claimers, which is harmless (a claim returns "up to" Limit).
// No attempt row is written: the running attempt is read from the job
// row (qAttemptList) and its row is inserted when it ends.
var qClaimFair = `WITH cand AS (
    SELECT c.id FROM unnest($2::text[], $3::int[]) AS x(tenant, n)
    CROSS JOIN LATERAL ` + tenantClaimProbe("$4", "$5") + ` AS c
), ` + claimCTEs("$4", "$6", "$7", "$8") + `
SELECT * FROM upd`

// claimCTEs are the CTEs that start the attempts of the jobs in cand, at
// now with a lease until leaseUntil for worker (SQL parameters), the last
// of them, upd, returning the claimed rows (jobCols and key_held).
// qClaimOne and qClaimFair share them.
//
// The lease lasts leaseUntil - now by the expiry clock ({db_now}) at least:
// a caller whose clock runs behind the database's gets its lease moved
// forward by the difference, as its heartbeats set it (qHeartbeat), or the
// rescuer, which reads the database's clock, would take the job back while
// it runs; one whose clock runs ahead keeps its later leaseUntil.
//
// key_held is idemtype.JobRow.KeyHeld: the claimed job's key record names
// it, is in progress, stores no lease and is live at now, and the job's
// new lease outlasts the expiry clock ({db_now}: the database's, unless
// the caller's decides) and now, as qRecordAcquireOwn would read it right
// after the claim. The record is locked FOR SHARE: the claim's snapshot may
// predate an acquirer of another owner that took the record's lease
// while the job was still available and committed just before the claim
// locked the job row; the lock reads the record's latest version and
// re-checks it (EvalPlanQual), so such a record is not reported held.
// (FOR KEY SHARE would not: it is compatible with the lease's non-key
// update and keeps the snapshot's version. Both seen in psql.) An
// acquirer that has not committed holds the job FOR SHARE (the held/lk
// CTEs of qRecordAcquireMany and qUpsertRecords), so the claim skips the
// job. A record locked by any other transaction in progress is skipped,
// not waited for (SKIP LOCKED): its job is reported not held, and its
// attempt acquires the key as before, under its job lease, which is
// renewed while it waits (TestSlowKeyAcquireKeepsItsLease). Jobs are
// locked before records, as everywhere. One primary-key lookup and one
// tuple lock per keyed job; the attempts of held keys skip RecordAcquire
// (internal/executor).
func claimCTEs(now, leaseUntil, worker, token string) string {
	return `claimed AS (
    UPDATE {schema}.jobs j SET
        state = 'running',
        attempt = j.attempt + 1,
        started_at = ` + now + `,
        lease_token = coalesce(nullif(` + token + `::text, ''), replace(gen_random_uuid()::text, '-', '')),
        lease_expires_at = ` + leaseUntil + `::timestamptz + ` + leaseShift(now) + `,
        worker_id = ` + worker + `
    WHERE j.id = ANY(ARRAY(SELECT id FROM cand))
      AND NOT EXISTS (SELECT 1 FROM {schema}.claims_given_back g WHERE g.token = ` + token + `::text)
    RETURNING ` + jobCols + `
), kh AS (
    SELECT c.id FROM claimed c
    CROSS JOIN LATERAL (SELECT 1 FROM {schema}.records kr
        WHERE kr.tenant = c.tenant AND kr.key = c.idempotency_key AND kr.job_id = c.id
          AND kr.status = 'in_progress' AND kr.lease_owner IS NULL
          AND (kr.expires_at IS NULL OR kr.expires_at > ` + now + `)
        LIMIT 1 FOR SHARE SKIP LOCKED) own
    WHERE c.idempotency_key <> '' AND c.lease_expires_at > greatest(` + now + `, {db_now})
), upd AS (
    SELECT claimed.*, claimed.id IN (SELECT kh.id FROM kh) AS key_held FROM claimed
)`
}

// sqlSlotTaken is true at now (an SQL expression) for a job r that takes
// a slot of the concurrency limits of its scope: a running one, or a
// cancelled one that still holds its FIFO partition (its handler may
// still run: qJobCancel), until the hold ends as the head rule's does
// (sqlPartitionTaken), or a holding job retried (qRetry) until the end of
// its old lease, which it keeps while it waits: its old handler may still
// run until then, and its own next run starts no earlier (sqlRetryRunAt),
// so it never waits for its own slot. Every count of running jobs for a
// limit uses it (the claims' and LimitList's), at the claim's now (the
// head rule's too). It implies the predicate of jobs_running_scope_idx
// (migration 0030), each arm one of the predicate's (a retried job's
// lease_expires_at > now implies IS NOT NULL), so that the counts are
// proved to fit the index.
func sqlSlotTaken(now string) string {
	return `(r.state = 'running' OR (r.state = 'cancelled' AND r.lease_expires_at IS NOT NULL)
        OR (r.state IN ('pending', 'scheduled', 'available') AND r.lease_expires_at > ` + now + `))`
}

// sqlPartitionTaken is true for a job h that keeps its partition's later
// jobs waiting: an unfinished one, or a cancelled one whose handler may
// still run (its hold: qJobCancel). It is the predicate of
// jobs_partition_idx (migration 0026), written the same way so that the
// head rule's probes are proved to fit the index and read it alone.
const sqlPartitionTaken = `(h.state IN ('pending', 'scheduled', 'available', 'running', 'retryable')
                  OR (h.state = 'cancelled' AND h.lease_expires_at IS NOT NULL))`

// tenantClaimProbe is the claim of one tenant's jobs in queue $1: up to
// x.n of tenant x.tenant's claimable jobs at now of kinds (SQL parameters),
// in claim order, FIFO heads only, locked SKIP LOCKED. qClaimOne and
// qClaimFair share it.
//
// The head rule of a partitioned job ends with a version check: the row
// version being checked is the one the statement's snapshot shows (a TID
// lookup of its ctid under that snapshot finds it). It always holds on the
// scan; it fails only when the row changed after the snapshot and its lock
// re-checks the latest version, whose head rule the snapshot can no longer
// tell (a retry of an earlier job of its partition writes such versions:
// qRetryLockPartitions), and such a row is skipped for this claim. It is
// the rule's last term, read only for a job that passed the rest, and a
// scalar subquery: an EXISTS was planned as a hashed subplan over a
// sequential scan of jobs. Unpartitioned jobs never reach it.
func tenantClaimProbe(now, kinds string) string {
	return `(
        SELECT j.id FROM {schema}.jobs j
        WHERE j.queue = $1 AND j.tenant = x.tenant
          AND j.state = 'available'
          AND j.run_at <= ` + now + `
          AND (` + kinds + `::text[] IS NULL OR j.kind = ANY(` + kinds + `::text[]))
          AND (j.partition_key = '' OR (NOT EXISTS (
              SELECT 1 FROM {schema}.jobs h
              WHERE h.tenant = j.tenant AND h.queue = j.queue AND h.partition_key = j.partition_key AND h.id < j.id
                AND h.partition_key <> ''
                AND ` + sqlPartitionTaken + `)
            AND NOT EXISTS (
              SELECT 1 FROM {schema}.jobs h
              WHERE h.tenant = j.tenant AND h.queue = j.queue AND h.partition_key = j.partition_key AND h.id > j.id
                AND h.partition_key <> ''
                AND ` + sqlPartitionTaken + `
                AND (h.state IN ('running', 'cancelled') OR h.lease_expires_at > ` + now + `))
            AND (SELECT v.ctid FROM {schema}.jobs v WHERE v.ctid = j.ctid) IS NOT NULL))
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT x.n
        FOR UPDATE OF j SKIP LOCKED
    )`
}

// tenantProbe is one step of the skip scan over jobs_claim_tenant_idx: the
// first tenant after the SQL expression after with claimable work in queue
// $1 at $2 of kinds $4 (NULL = any). It orders by the whole index key, not
// by tenant alone (see qClaimOne). qClaimOne and qClaimRotation share it.
func tenantProbe(after string) string {
	return `(SELECT j.tenant FROM {schema}.jobs j WHERE j.queue = $1
        AND j.state = 'available' AND j.run_at <= $2 AND j.tenant > ` + after + `
        AND ($4::text[] IS NULL OR j.kind = ANY($4::text[])) ORDER BY j.tenant, j.priority DESC, j.run_at, j.id LIMIT 1)`
}

// qClaimRotation lists the tenants a claim of queue $1 visits, as
// store.ClaimTenants does but in one statement: up to $6 tenants with
// claimable work after the cursor $3, not in $5, then (when fewer) from
// the first tenant up to the cursor; one index probe per tenant.
var qClaimRotation = `WITH RECURSIVE fwd(tenant) AS (
    SELECT ` + tenantProbe("$3") + `
    UNION ALL
    SELECT ` + tenantProbe("fwd.tenant") + ` FROM fwd WHERE fwd.tenant IS NOT NULL
), fwdl AS (
    SELECT tenant FROM fwd WHERE tenant IS NOT NULL AND tenant <> ALL($5::text[]) LIMIT $6
), wrap(tenant) AS (
    SELECT ` + tenantProbe("''") + ` WHERE $3 <> '' AND (SELECT count(*) FROM fwdl) < $6
    UNION ALL
    SELECT ` + tenantProbe("wrap.tenant") + ` FROM wrap WHERE wrap.tenant IS NOT NULL AND wrap.tenant < $3
)
SELECT tenant FROM (
    SELECT 0 AS part, tenant FROM fwdl
    UNION ALL
    (SELECT 1, tenant FROM wrap WHERE tenant IS NOT NULL AND tenant <= $3 AND tenant <> ALL($5::text[])
        LIMIT greatest(0, $6 - (SELECT count(*) FROM fwdl)))
) x ORDER BY part, tenant`

// flowRow is one scanned flow_controls row.
type flowRow struct {
	limit  store.Limit
	paused bool
	defVer int64 // the definition's version (migration 0019)
}

// defVers maps the scopes of rows to their definitions' versions.
func defVers(rows []flowRow) map[store.FlowScope]int64 {
	m := make(map[store.FlowScope]int64, len(rows))
	for _, r := range rows {
		m[r.limit.FlowScope] = r.defVer
	}
	return m
}

// loadFlow reads the flow-control rows of queues (nil = all).
func (s *Store) loadFlow(ctx context.Context, q querier, sql string, queues []string) ([]flowRow, error) {
	return scanFlow(q.Query(ctx, s.sql(sql), queues))
}

// loadRunning counts the jobs that take a slot at now (sqlSlotTaken) per
// (tenant, queue): every one when queues is nil, else those a claim of
// queues can be limited by.
func (s *Store) loadRunning(ctx context.Context, q querier, queues []string, now time.Time) ([]store.RunningCount, error) {
	if queues == nil {
		return scanRunning(q.Query(ctx, s.sql(qRunningScopes), now))
	}
	return scanRunning(q.Query(ctx, s.sql(qRunningOfClaim), queues, now))
}

// usageCols are LimitUsage rows as the column arrays of qFlowUsage and
// qDefaultUsage.
type usageCols struct {
	tenants, queues []string
	starts          []time.Time
	used            []int
	thr             []int64
}

// has reports whether c writes the limit of scope.
func (c *usageCols) has(scope store.FlowScope) bool {
	for i := range c.tenants {
		if c.tenants[i] == scope.Tenant && c.queues[i] == scope.Queue {
			return true
		}
	}
	return false
}

func (c *usageCols) add(u store.LimitUsage) {
	c.tenants, c.queues = append(c.tenants, u.Scope.Tenant), append(c.queues, u.Scope.Queue)
	c.starts, c.used, c.thr = append(c.starts, u.WindowStart), append(c.used, u.WindowUsed), append(c.thr, u.Throttled)
}

// loadWindows reads tenants' windows under default limits.
func (s *Store) loadWindows(ctx context.Context, q querier, sql string, args ...any) ([]store.InheritedWindow, error) {
	return scanWindows(q.Query(ctx, s.sql(sql), args...))
}

// splitFlow returns the limits and paused scopes of the rows.
func splitFlow(rows []flowRow) (limits, weights []*store.Limit, paused []store.FlowScope) {
	for _, r := range rows {
		if r.paused {
			paused = append(paused, r.limit.FlowScope)
		}
		if r.limit.Limited() {
			l := r.limit
			limits = append(limits, &l)
		}
		if r.limit.Weight > 0 {
			l := r.limit
			weights = append(weights, &l)
		}
	}
	return limits, weights, paused
}

// LimitPut implements store.FlowControl.
func (s *Store) LimitPut(ctx context.Context, p *store.LimitPutParams) (*store.Limit, error) {
	l := p.Limit
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("put limit: %w", err)
	}
	l.Period = l.Period.Truncate(time.Microsecond) // as kept, and as returned
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	if l.IsDefault() {
		err = s.tx(ctx, func(tx pgx.Tx) error {
			// The default row first, as every writer of its tenants'
			// windows locks it before them.
			if _, err := s.lockDefaults(ctx, tx, []string{l.Queue}); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.sql(qDefaultReset), l.Queue, l.Rate, l.Period.Microseconds()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, s.sql(qLimitPut), l.Tenant, l.Queue, l.Rate, l.Period.Microseconds(), l.Concurrency, l.Weight)
			return err
		})
	} else {
		_, err = db.Exec(ctx, s.sql(qLimitPut), l.Tenant, l.Queue, l.Rate, l.Period.Microseconds(), l.Concurrency, l.Weight)
	}
	if err != nil {
		return nil, fmt.Errorf("put limit: %w", err)
	}
	return &store.Limit{FlowScope: l.FlowScope, Rate: l.Rate, Period: l.Period, Concurrency: l.Concurrency, Weight: l.Weight}, nil
}

// LimitList implements store.FlowControl.
func (s *Store) LimitList(ctx context.Context, p *store.LimitListParams) ([]*store.Limit, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	rows, err := s.loadFlow(ctx, db, qFlowLoad, nil)
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", err)
	}
	now := store.OrNow(p.Now)
	running, err := s.loadRunning(ctx, db, nil, now)
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", err)
	}
	out := []*store.Limit{}
	for _, r := range rows {
		if (!r.limit.Limited() && r.limit.Weight == 0) || (p.Tenant != "" && r.limit.Tenant != p.Tenant) {
			continue
		}
		l := r.limit
		out = append(out, &l)
	}
	store.SetRunning(out, running)
	store.CurrentWindows(out, now)
	for _, l := range out {
		if l.Rate > 0 {
			l.WindowUsed = max(0, l.WindowUsed-s.ownReserved(l.FlowScope, false, l.WindowStart))
		}
	}
	if p.Tenant != "" && p.Tenant != store.EveryTenant {
		ws, err := s.loadWindows(ctx, db, qDefaultWindowsOf, p.Tenant)
		if err != nil {
			return nil, fmt.Errorf("list limits: %w", err)
		}
		for i := range ws {
			w := &ws[i]
			w.WindowUsed = max(0, w.WindowUsed-s.ownReserved(store.FlowScope{Tenant: w.Tenant, Queue: w.Queue}, true, w.WindowStart))
		}
		all := make([]*store.Limit, 0, len(rows))
		for _, r := range rows {
			all = append(all, &r.limit)
		}
		out = append(out, store.DefaultUsage(all, p.Tenant, ws, running, now)...)
		store.SortLimits(out)
	}
	return out, nil
}

// LimitDelete implements store.FlowControl.
func (s *Store) LimitDelete(ctx context.Context, p *store.LimitDeleteParams) error {
	if err := p.Scope.Validate(); err != nil {
		return fmt.Errorf("delete limit: %w", err)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.sql(qLimitClear), p.Scope.Tenant, p.Scope.Queue)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return idemtype.ErrNotFound
		}
		if p.Scope.IsDefault() {
			if _, err := tx.Exec(ctx, s.sql(qDefaultReset), p.Scope.Queue, -1, -1); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, s.sql(qFlowPrune), p.Scope.Tenant, p.Scope.Queue)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete limit: %w", err)
	}
	return nil
}

// QueuePause implements store.FlowControl.
func (s *Store) QueuePause(ctx context.Context, p *store.QueuePauseParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("pause queue: %w", err)
	}
	db, err := s.db()
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, s.sql(qPause), p.Scope.Tenant, p.Scope.Queue); err != nil {
		return fmt.Errorf("pause queue: %w", err)
	}
	return nil
}

// QueueResume implements store.FlowControl. It announces the queue (as an
// insert does) so that waiting producers of every node claim at once.
func (s *Store) QueueResume(ctx context.Context, p *store.QueuePauseParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("resume queue: %w", err)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql(qResume), p.Scope.Tenant, p.Scope.Queue); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql(qFlowPrune), p.Scope.Tenant, p.Scope.Queue); err != nil {
			return err
		}
		// Sent at commit, when the resume is visible to the claims it wakes.
		_, err := tx.Exec(ctx, qNotify, s.schema, []string{p.Scope.Queue})
		return err
	})
	if err != nil {
		return fmt.Errorf("resume queue: %w", err)
	}
	return nil
}

// QueuePauseList implements store.FlowControl.
func (s *Store) QueuePauseList(ctx context.Context) ([]store.FlowScope, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	rows, err := s.loadFlow(ctx, db, qFlowLoad, nil)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	out := []store.FlowScope{}
	for _, r := range rows {
		if r.paused {
			out = append(out, r.limit.FlowScope)
		}
	}
	store.SortScopes(out)
	return out, nil
}

// claimFlow is JobClaim: without limits on its queues it claims straight
// from the pool (pauses still apply); with limits it locks their rows,
// claims within their budget and writes the budget back in one
// transaction, so claims of every node spend it one at a time.
func (s *Store) claimFlow(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	now := store.OrNow(p.Now)
	// One queue whose last claim found no flow-control rows: try the one
	// round-trip claim, which checks that there still are none.
	if len(p.Queues) == 1 && !s.flowHints.get(p.Queues[0]) {
		out, ok, err := s.claimOne(ctx, s.pool, p, now)
		if err != nil {
			return nil, err
		}
		if ok {
			if p.Report != nil {
				*p.Report = store.ClaimReport{}
			}
			return out, nil
		}
		s.flowHints.set(p.Queues[0], true)
	}
	// Queues whose last claim found limits: straight to the locked claim,
	// which reads the rows again under the lock.
	if sh := s.shapes.get(p.Queues); sh.limited {
		return s.claimLimitedFirst(ctx, p, now, sh)
	}
	rows, err := s.loadFlow(ctx, db, qFlowLoad, p.Queues)
	if err != nil {
		return nil, err
	}
	limits, weights, paused := splitFlow(rows)
	if len(p.Queues) == 1 {
		s.flowHints.set(p.Queues[0], len(limits)+len(weights)+len(paused) > 0)
	}
	if len(limits) == 0 {
		pre, err := s.promoteAndList(ctx, s.pool, p, now)
		if err != nil {
			return nil, err
		}
		b := store.NewClaimBudget(now, nil, paused)
		b.SetWeights(weights)
		out, err := s.claimFair(ctx, db, p, b, now, pre)
		b.Report(p.Report)
		return out, err
	}
	return s.claimLimitedFirst(ctx, p, now, shapeOf(limits))
}

// claimFair claims up to p.Limit jobs of p.Queues within budget b, tenant
// by tenant in rotation.
// pre, when not nil, is the first queue's rotation listed ahead of time.
func (s *Store) claimFair(ctx context.Context, q querier, p *store.JobClaimParams, b *store.ClaimBudget, now time.Time, pre *rotation) ([]*idemtype.JobRow, error) {
	var out []*idemtype.JobRow
	for _, queue := range p.Queues {
		if len(out) >= p.Limit || !b.QueueOpen(queue) {
			continue
		}
		jobs, err := s.claimQueue(ctx, q, p, b, queue, now, p.Limit-len(out), pre)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	return out, nil
}

// claimQueue claims up to limit jobs of one queue: each visited tenant's
// fair share, then what is left among the tenants that filled theirs.
func (s *Store) claimQueue(ctx context.Context, q querier, p *store.JobClaimParams, b *store.ClaimBudget, queue string, now time.Time, limit int, pre *rotation) ([]*idemtype.JobRow, error) {
	if pre != nil && pre.fixed {
		out, _, err := s.claimRounds(ctx, q, p, b, queue, now, limit, pre.tenants)
		return out, err
	}
	excluded := b.Excluded(queue, p.Tenant)
	if p.Tenant == "" {
		s.excluded.set(queue, excluded)
	}
	var kinds []string
	if p.Kinds != nil {
		kinds = p.Kinds
	}
	var tenants []string
	if p.Tenant != "" {
		if !containsStr(excluded, p.Tenant) {
			tenants = []string{p.Tenant}
		}
	} else {
		var ok bool
		if tenants, ok = pre.use(queue, limit, excluded); !ok {
			rows, err := q.Query(ctx, s.sql(qClaimRotation), queue, now, s.cursors.Get(queue), kinds, append([]string{}, excluded...), limit)
			if err != nil {
				return nil, fmt.Errorf("list tenants: %w", err)
			}
			if tenants, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return nil, fmt.Errorf("list tenants: %w", err)
			}
		}
	}
	out, turns, err := s.claimRounds(ctx, q, p, b, queue, now, limit, tenants)
	if err != nil {
		return nil, err
	}
	if p.Tenant == "" {
		// Past the tenants whose turn the claim took, not past one the
		// budget left out (store.ClaimRoundsTurns).
		s.rotated(queue, turns)
	}
	return out, nil
}

// claimRounds claims up to limit jobs of queue among tenants: each
// tenant's fair share within budget b, then what is left among the tenants
// that filled theirs, until the claim is full or no tenant filled its share.
// turns are the tenants whose turn it took (store.ClaimRoundsTurns).
func (s *Store) claimRounds(ctx context.Context, q querier, p *store.JobClaimParams, b *store.ClaimBudget, queue string, now time.Time, limit int, tenants []string) (out []*idemtype.JobRow, turns []string, err error) {
	var kinds []string
	if p.Kinds != nil {
		kinds = p.Kinds
	}
	return store.ClaimRoundsTurns(b, queue, limit, tenants, func(ts []string, ns []int) ([]*idemtype.JobRow, error) {
		if pool, ok := q.(*pgxpool.Pool); ok {
			// Outside a transaction: one of its own, which takes the
			// claim token's lock (claim_token_lock.go).
			return s.claimFairLocked(ctx, pool, p.LeaseToken, queue, ts, ns, now, kinds, p.LeaseUntil, p.WorkerID, p.LeaseToken)
		}
		rows, err := q.Query(ctx, s.sql(qClaimFair), queue, ts, ns, now, kinds, p.LeaseUntil, p.WorkerID, p.LeaseToken)
		if err != nil {
			return nil, err
		}
		return collect(rows, scanClaimed)
	})
}

func containsStr(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// concLocks is the SQL expression that takes the advisory locks (class $2)
// of the queue scopes that query scopes lists, one per scope, in hash
// order: qConcLock's and qReservedSetup's, which must lock alike.
func concLocks(scopes string) string {
	return `(SELECT count(*) FROM (SELECT pg_advisory_xact_lock($2::integer, h) FROM (SELECT DISTINCT hashtext(q.queue) AS h
        FROM (` + scopes + `) q(queue) ORDER BY 1) hs) l)`
}

// flowLockClass is the first key of the schema's advisory locks of the
// queue scopes that hold concurrency limits (qConcLock).
func (s *Store) flowLockClass() int32 {
	h := fnv.New32a()
	h.Write([]byte("idem-flow:" + s.schema))
	return int32(h.Sum32())
}
