package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// The limited claim in one round trip: [BEGIN, JIT off and the advisory
// locks of the queue scopes with concurrency limits (qLockedSetup),
// plan_cache_mode, lock
// the limit rows (qFlowLockShape), qClaimOneLimited,
// COMMIT] in one pipelined batch, for a claim of one queue whose limits
// all have room for the whole claim. It claims exactly what the general path (claimLimited) would claim
// in its first round, and writes the same usage back; when a limit could
// bind, it claims nothing and the general path runs.
//
// Why it is exact: the statements of a batch run one after the other, each
// with its own snapshot (READ COMMITTED), so qClaimOneLimited's snapshot is
// taken after qFlowLockShape holds the limit rows (and qLockedSetup the
// advisory locks that reserved claims take instead of concurrency limits'
// row locks): every claim that spent from
// them before has committed (claims hold the lock until they commit), and
// no claim that spends from them runs until this one commits. Within that
// snapshot the statement reads each limit's window and counts the running
// jobs of its scope (jobs_running_scope_idx), which is what the general
// path reads after its lock.
//
// What the statement decides (qClaimOneLimited):
//   - flow, dflt, inh, lim: every rate or concurrency limit of the queue's
//     scopes (the queue, the tenants, tenants in the queue) with what is
//     left of it now (store.Limit.budget in SQL: a fixed window of the
//     period since the epoch; a window later than now's counts as spent;
//     running jobs counted per scope through jobs_running_scope_idx), and
//     the tenants' copies of default limits (tenant '*') for the tenants
//     with a current window or running jobs under one and no limit of their
//     own for its queue scope (ClaimBudget.SetInherited).
//   - guard: no weight or pause applies, and every queue-wide limit has at
//     least $5 (the claim's size) left, so no claim of this size can spend
//     it. Otherwise ok is false.
//   - spent, hit: the limits of tenants that are spent (nothing left); the
//     rotation skips those tenants, as ClaimBudget.Excluded does. Those
//     whose tenant has a job the claim could take (of queue $1, of its
//     kinds, due: one probe of jobs_claim_tenant_idx each, only for spent
//     limits) held work back: each counts one throttled claim (a default
//     limit once, and each tenant's window under it), as the general path
//     counts (ClaimBudget.HeldBack).
//   - fits: every visited tenant's limits, its copies of defaults
//     included, have room for the tenant's want (its first-round share), so
//     ClaimBudget.Quota would have granted all of it. Otherwise ok is false
//     and nothing is claimed.
//   - spend, use, use_inherited, use_default: each rate limit the claim spent
//     from moves to now's window and counts the claimed jobs of its scope;
//     a tenant's window under a default is upserted (ClaimBudget.Usage).
//
// It returns ok, the visited tenants, whether spent limits throttled the
// claim, the earliest refill among them and the queue scopes of the
// default limits it counted the claim on (use_default), then the claimed
// jobs (one row of NULL job columns when none was claimed), like qClaimOne.
var qClaimOneLimited = `WITH RECURSIVE flow AS (
    SELECT f.tenant, f.queue, f.rate, f.period_us, f.concurrency, f.window_start, f.window_used,
        CASE WHEN f.rate > 0 THEN
            'epoch'::timestamptz + (n.us - ((n.us % f.period_us) + f.period_us) % f.period_us) * interval '1 microsecond' END AS ws
    FROM {schema}.flow_controls f, (SELECT (extract(epoch FROM $2::timestamptz) * 1000000)::bigint AS us) n
    WHERE (f.queue = '' OR f.queue = $1) AND (f.rate > 0 OR f.concurrency > 0)
), dflt AS (
    SELECT * FROM flow WHERE tenant = '*'
), inh AS (
    SELECT t.tenant, d.queue, d.rate, d.period_us, d.concurrency, w.window_start, coalesce(w.window_used, 0) AS window_used, d.ws
    FROM dflt d
    CROSS JOIN LATERAL (
        SELECT w.tenant FROM {schema}.flow_default_windows w WHERE d.rate > 0 AND w.queue = d.queue
            AND w.window_start > $2::timestamptz - d.period_us * interval '1 microsecond'
        UNION
        SELECT r.tenant FROM {schema}.jobs r WHERE d.concurrency > 0 AND ` + sqlSlotTaken("$2::timestamptz") + ` AND (d.queue = '' OR r.queue = d.queue)
    ) t
    LEFT JOIN {schema}.flow_default_windows w ON w.queue = d.queue AND w.tenant = t.tenant
    WHERE NOT EXISTS (SELECT 1 FROM flow o WHERE o.tenant = t.tenant AND o.queue = d.queue)
), lim AS (
    SELECT a.*, least(a.rate_left,
        CASE WHEN a.concurrency = 0 THEN NULL
             WHEN a.tenant = '' THEN greatest(0, a.concurrency - (SELECT count(*) FROM {schema}.jobs r
                 WHERE ` + sqlSlotTaken("$2::timestamptz") + ` AND r.queue = a.queue))::int
             WHEN a.queue = '' THEN greatest(0, a.concurrency - (SELECT count(*) FROM {schema}.jobs r
                 WHERE ` + sqlSlotTaken("$2::timestamptz") + ` AND r.tenant = a.tenant))::int
             ELSE greatest(0, a.concurrency - (SELECT count(*) FROM {schema}.jobs r
                 WHERE ` + sqlSlotTaken("$2::timestamptz") + ` AND r.tenant = a.tenant AND r.queue = a.queue))::int END) AS left_n
    FROM (
        SELECT b.*, CASE WHEN b.rate = 0 THEN NULL
             WHEN b.window_start = b.ws THEN greatest(0, b.rate - b.window_used)
             WHEN b.window_start > b.ws THEN 0
             ELSE b.rate END AS rate_left
        FROM (
            SELECT tenant, queue, rate, period_us, concurrency, window_start, window_used, ws, false AS inh FROM flow WHERE tenant <> '*'
            UNION ALL
            SELECT tenant, queue, rate, period_us, concurrency, window_start, window_used, ws, true FROM inh
        ) b
    ) a
), guard AS (
    SELECT NOT EXISTS (SELECT 1 FROM {schema}.flow_controls f
            WHERE (f.queue = '' OR f.queue = $1) AND (f.weight > 0 OR f.paused))
        AND NOT EXISTS (SELECT 1 FROM lim WHERE tenant = '' AND left_n < $5) AS ok
), spent AS (
    SELECT * FROM lim WHERE tenant <> '' AND left_n = 0 AND ($8::text = '' OR tenant = $8)
), hit AS (
    -- OFFSET 0: one probe per spent limit, never a semi-join reading
    -- every claimable job of the queue.
    SELECT * FROM spent h WHERE EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.queue = $1 AND j.tenant = h.tenant
        AND j.state = 'available' AND j.run_at <= $2
        AND ($4::text[] IS NULL OR j.kind = ANY($4::text[])) OFFSET 0)
), ` + claimOneBody("ARRAY(SELECT tenant FROM spent)", "(SELECT ok FROM fits)", "", "$10") + `, fits AS (
    SELECT (SELECT ok FROM guard)
        AND NOT EXISTS (SELECT 1 FROM lim l JOIN want x ON x.tenant = l.tenant WHERE x.n > 0 AND l.left_n < x.n)
        AND NOT EXISTS (SELECT 1 FROM want x CROSS JOIN dflt d WHERE x.n > 0
            AND NOT EXISTS (SELECT 1 FROM flow o WHERE o.tenant = x.tenant AND o.queue = d.queue)
            AND NOT EXISTS (SELECT 1 FROM inh i WHERE i.tenant = x.tenant AND i.queue = d.queue)
            AND least(nullif(d.rate, 0), nullif(d.concurrency, 0)) < x.n) AS ok
), got AS (
    SELECT tenant, count(*)::int AS n FROM upd GROUP BY tenant
), spend AS (
    SELECT l.tenant, l.queue, l.ws, CASE WHEN l.tenant = '' THEN (SELECT sum(n) FROM got) ELSE g.n END AS n, false AS hit
    FROM lim l LEFT JOIN got g ON g.tenant = l.tenant
    WHERE NOT l.inh AND l.rate > 0 AND (l.tenant = '' OR g.n > 0)
    UNION ALL
    SELECT tenant, queue, ws, 0, true FROM hit WHERE NOT inh
), use AS (
    UPDATE {schema}.flow_controls f SET
        window_start = CASE WHEN u.n > 0 THEN u.ws ELSE f.window_start END,
        window_used = CASE WHEN u.n > 0
            THEN (CASE WHEN f.window_start = u.ws THEN f.window_used ELSE 0 END) + u.n ELSE f.window_used END,
        throttled = f.throttled + CASE WHEN u.hit THEN 1 ELSE 0 END
    FROM spend u
    WHERE f.tenant = u.tenant AND f.queue = u.queue AND (u.n > 0 OR u.hit) AND (SELECT ok FROM fits)
), use_inherited AS (
    INSERT INTO {schema}.flow_default_windows AS w (tenant, queue, window_start, window_used, throttled)
    SELECT g.tenant, d.queue, d.ws, g.n, 0 FROM got g CROSS JOIN dflt d
    WHERE d.rate > 0 AND NOT EXISTS (SELECT 1 FROM flow o WHERE o.tenant = g.tenant AND o.queue = d.queue) AND (SELECT ok FROM fits)
    UNION ALL
    SELECT h.tenant, h.queue,
        CASE WHEN h.rate > 0 AND (h.window_start IS NULL OR h.ws > h.window_start) THEN h.ws
             ELSE coalesce(h.window_start, '0001-01-01 00:00:00+00') END,
        CASE WHEN h.rate > 0 AND (h.window_start IS NULL OR h.ws > h.window_start) THEN 0 ELSE h.window_used END, 1
    FROM hit h WHERE h.inh AND (SELECT ok FROM fits)
    ON CONFLICT (queue, tenant) DO UPDATE SET window_start = excluded.window_start,
        window_used = CASE WHEN excluded.throttled > 0 THEN excluded.window_used
            ELSE (CASE WHEN w.window_start = excluded.window_start THEN w.window_used ELSE 0 END) + excluded.window_used END,
        throttled = w.throttled + excluded.throttled
), use_default AS (
    UPDATE {schema}.flow_controls f SET throttled = f.throttled + 1
    WHERE f.tenant = '*' AND f.queue IN (SELECT queue FROM hit WHERE inh) AND (SELECT ok FROM fits)
), meta AS (
    SELECT (SELECT ok FROM fits) AS ok, (SELECT coalesce(array_agg(tenant ORDER BY ord), '{}') FROM ten) AS visited,
        EXISTS (SELECT 1 FROM hit) AS throttled,
        (SELECT min(ws + period_us * interval '1 microsecond') FROM hit WHERE rate_left = 0) AS refill,
        ARRAY(SELECT DISTINCT queue FROM hit WHERE inh) AS counted
)
SELECT m.ok, m.visited, m.throttled, m.refill, m.counted, u.* FROM meta m LEFT JOIN upd u ON true`

// qFlowLockShape is qFlowLock returning only the shape of the limits it
// locked (flowShape), not every row.
var qFlowLockShape = `SELECT coalesce(bool_or(rate > 0 OR concurrency > 0), false), coalesce(bool_or(concurrency > 0), false),
    coalesce(bool_or(tenant = '*' AND (rate > 0 OR concurrency > 0)), false)
FROM (` + qFlowLock + `) l`

// fastSkips counts, per set of queues, the limited claims still to take
// the general path after the one-round-trip claim found a limit that could
// bind (or a weight, pause or default limit it does not handle): it is
// tried again after limitedRetry claims, so a queue that is throttled or
// weighted pays the failed attempt on one claim in limitedRetry+1 only.
type fastSkips struct {
	mu sync.Mutex
	m  map[string]int
}

// limitedRetry is how many limited claims skip the one-round-trip claim
// after it declined.
const limitedRetry = 8

// take reports whether the one-round-trip claim may be tried for queues,
// counting down a skip.
func (f *fastSkips) take(queues []string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := queuesKey(queues)
	if n := f.m[k]; n > 0 {
		f.m[k] = n - 1
		return false
	}
	return true
}

// decline makes the next limitedRetry claims of queues skip the
// one-round-trip claim.
func (f *fastSkips) decline(queues []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]int{}
	}
	f.m[queuesKey(queues)] = limitedRetry
}

// oneRoundMode chooses the path of limited claims; tests set it to compare
// the paths (the zero value is what a store does).
type oneRoundMode int8

const (
	oneRoundAuto   oneRoundMode = iota // try it, skip it a while after a decline
	oneRoundNever                      // always the general path
	oneRoundAlways                     // try it on every claim it may apply to
)

// claimLimitedFirst is a claim of queues with limits: the reserved claim
// (claim_reserved.go) or the one-round-trip claim when one may apply and
// accepts, else the general path.
func (s *Store) claimLimitedFirst(ctx context.Context, p *store.JobClaimParams, now time.Time, sh flowShape) ([]*idemtype.JobRow, error) {
	try := len(p.Queues) == 1
	switch s.oneRoundMode {
	case oneRoundNever:
		try = false
	case oneRoundAuto:
		try = try && s.skips.take(p.Queues)
	}
	if len(p.Queues) == 1 && !s.noReserve && s.oneRoundMode != oneRoundNever {
		out, applies, ok, err := s.claimReserved(ctx, p, now)
		if err != nil {
			return nil, err
		}
		if ok {
			s.reservedTaken.Add(1)
			return out, nil
		}
		if applies || s.holdsReserved() {
			// The locking one-round claim would not see what the store
			// holds; the general path takes it back.
			return s.claimLimited(ctx, p, now, sh, nil)
		}
	}
	if try {
		out, ok, err := s.claimOneLimited(ctx, p, now, sh)
		if err != nil {
			return nil, err
		}
		if ok {
			s.oneRoundTaken.Add(1)
			return out, nil
		}
		s.oneRoundDeclined.Add(1)
		s.skips.decline(p.Queues)
	}
	return s.claimLimited(ctx, p, now, sh, nil)
}

// claimOneLimited is the one-round-trip limited claim (qClaimOneLimited).
// ok is false when it declined: then nothing was claimed or written but
// the promotion of the queue's due jobs (qClaimPromote), which stands.
// Later rounds among the tenants that filled their share (when others ran
// short) take the general path with those tenants as its visit list: it
// reads the budget again under its own lock, which then holds what the
// first round spent, and runs the rounds store.ClaimRounds runs after the
// first, so the claim as a whole takes and counts what the general path
// would have (it does not count the claim again on the defaults the first
// round counted it on: laterRounds.counted).
func (s *Store) claimOneLimited(ctx context.Context, p *store.JobClaimParams, now time.Time, sh flowShape) (out []*idemtype.JobRow, ok bool, err error) {
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, false, err
	}
	defer conn.Release()
	queue := p.Queues[0]
	var kinds []string
	if p.Kinds != nil {
		kinds = p.Kinds
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.sql(qLockedSetup), p.Queues, s.flowLockClass(), s.claimLockClass(), p.LeaseToken)
	// The lock statement's plan does not depend on its queues, but
	// PostgreSQL kept planning it anew for each claim (custom plans).
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	s.queuePromote(b, p.Queues, now)
	b.Queue(s.sql(qFlowLockShape), p.Queues)
	cursor, solo := s.rotationStart(queue)
	b.Queue(s.sql(qClaimOneLimited), queue, now, cursor, kinds, p.Limit, p.LeaseUntil, p.WorkerID, p.Tenant, solo, p.LeaseToken)
	b.Queue("COMMIT")
	var (
		visited, counted []string
		throttled        bool
		refill           *time.Time
	)
	err = func() error {
		br := conn.SendBatch(ctx, b)
		defer br.Close()
		if err := execPromoteFirst(ctx, br, 4, 3); err != nil {
			return err
		}
		var found flowShape
		if err := br.QueryRow().Scan(&found.limited, &found.concurrency, &found.defaults); err != nil {
			return err
		}
		s.shapes.set(p.Queues, found)
		if out, err = readClaimRows(br, &ok, &visited, &throttled, &refill, &counted); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		promotedCommitted(ctx)
		return br.Close()
	}()
	if err != nil || !ok {
		return nil, false, err
	}
	var report store.ClaimReport
	if throttled {
		report.Throttled = true
		if refill != nil {
			report.NextRefill = refill.UTC()
		}
	}
	full := s.afterFirstRound(p, now, out, visited, nil)
	if len(full) > 0 && len(out) < p.Limit {
		more := *p
		more.Limit = p.Limit - len(out)
		var r store.ClaimReport
		more.Report = &r
		jobs, err := s.claimLimited(ctx, &more, now, sh, &laterRounds{tenants: full, counted: counted})
		if err != nil {
			return nil, false, err
		}
		out = append(out, jobs...)
		report.Throttled = report.Throttled || r.Throttled
		if !r.NextRefill.IsZero() && (report.NextRefill.IsZero() || r.NextRefill.Before(report.NextRefill)) {
			report.NextRefill = r.NextRefill
		}
	}
	if p.Report != nil {
		*p.Report = report
	}
	return out, true, nil
}
