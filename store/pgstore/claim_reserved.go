package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reserved rate budget: the limited claim of one queue whose scope holds
// no tenant concurrency (a tenant's own or a default's): queue limits
// (rate, concurrency), tenants' rates, default rates (tenant "*"),
// weights and pauses. The locking claims
// write every rate limit they spend from on every claim, which with a
// hundred limited tenants is most of a claim's cost; this one spends rate
// budget the store reserved in advance, in slices, and writes nothing but
// the claimed jobs (a queue concurrency limit's row is locked, not written).
//
//   - A store reserves a slice of a limit's current window (qFlowReserve:
//     the rows locked in one order, each granted the least of the slice and
//     what is left of the window) and keeps it: a reserved job counts as
//     started in the window at once, so the limit is never exceeded, however
//     many processes reserve. What a store has not spent when the window
//     ends is lost with the window; Close returns what is left of current
//     windows. Until then another process cannot start it: with several
//     processes a tenant may start fewer than its rate in a window (at most
//     a slice less per other process that holds one), never more.
//     LimitList shows the store's own unspent reservations as not used.
//   - The claim (qClaimReserved) skips tenants with nothing reserved and
//     nothing left to reserve, and checks in its own snapshot that the
//     limit definitions are those the store cached (flow_generation,
//     migration 0019: a limit put, changed or removed since makes it
//     decline and the store read them again). When a visited tenant holds
//     less than its first-round share, or the queue's rate less than the
//     claim, it declines too: the general path, which takes the store's
//     reservations back first (absorbReserved), claims instead.
//   - A queue concurrency limit: the claim first locks its row (as every
//     locking claim of the queue does), then counts the queue's running
//     jobs in the next statement, whose snapshot sees every claim that
//     held the lock before. Claims of such a queue take turns, as on the
//     locking path; the row is locked, not written.
//
//   - Default rates: each tenant's window under a default (a
//     flow_default_windows row) is reserved like a limit's own, in the same
//     transaction, after the default's row is locked (qDefaultReserve). The
//     store holds inherited budgets of the tenants it has met (inherit) and
//     writes them to flow_known (migration 0020) before it claims; the
//     claim statement declines when it would visit a tenant without such a
//     row, and the claim runs once more with that tenant's budgets.
//   - Weights divide the first round in the statement (wantOf); paused
//     tenants are skipped, a paused queue claims nothing.
//
// Throttled claims are counted on the limits that stopped them after the
// claim: on limit rows in one ordered statement, on tenants' windows under
// defaults in a transaction that locks the default rows first.

// reserveSlice is what a store reserves of a limit at once: a sixteenth of
// the rate (rounded up), at most 1,000 jobs.
func reserveSlice(rate int) int {
	return min(rate, max((rate+15)/16, 1), 1000)
}

// rateBudget is one rate limit of a queue's scope and the budget the store
// holds of it.
type rateBudget struct {
	limit  store.Limit // scope, rate and period
	defVer int64       // the row's def_ver when read (migration 0019)
	ws     time.Time   // the window the reservation belongs to
	left   int         // reserved, not spent, not held
	held   int         // taken out of left by the claim in flight
	empty  bool        // the last reservation found window ws with nothing left
	// inherited: limit is a tenant's copy of a default limit (tenant "*"
	// of queue scope limit.Queue), its window a flow_default_windows row;
	// defVer is the default row's.
	inherited bool
}

// allowance is what b lets the store start at now without reserving.
func (b *rateBudget) allowance(now time.Time) int {
	if !b.ws.Equal(b.limit.WindowAt(now)) {
		return 0
	}
	return b.left
}

// queueBudget is what the store knows of one queue's limits.
type queueBudget struct {
	gen      int64                    // flow_generation when read
	shape    flowShape                // of the limits read
	conc     bool                     // the queue has a concurrency limit
	eligible bool                     // the reserved claim applies
	queue    []*rateBudget            // rate limits of the queue (tenant "")
	tenants  map[string][]*rateBudget // each tenant's rate limits in scope
	names    []string                 // the keys of tenants, sorted
	list     []*rateBudget            // queue and then every tenant's
	loaded   time.Time                // when read (an ineligible queue is read again)
	// defaults are the default rate limits (tenant "*") of the queue's
	// scope, as rate budgets that hold nothing; own the scopes of tenants'
	// own rate limits. Every tenant without its own limit for a default's
	// queue scope inherits it: with defaults, a visited tenant without a
	// flow_known row of the store (one it has not met) makes the claim
	// decline, and the store adds the tenant's inherited budgets (inherit).
	defaults []*rateBudget
	own      map[store.FlowScope]bool
	seen     map[string]bool // tenants inherit has been called for
	// unsynced are tenants seen (with defaults) not yet written to
	// flow_known (migration 0020); fresh: the store's rows of the queue
	// there are from an earlier read and must go first.
	unsynced []string
	fresh    bool
	// closed: the queue is paused (nothing is claimed); paused are the
	// tenants whose work in it is paused (the claim skips them).
	closed bool
	paused []string
	// weights are the weighted scopes of the queue's scope; weightT and
	// weightN each weighted tenant's weight in the queue (the most specific
	// scope's), for the claim statement.
	weights []*store.Limit
	weightT []string
	weightN []int32
	// claimMu serialises the store's reserved claims of the queue (they
	// come from one producer, so it rarely waits); a claim that took it on
	// a budget replaced meanwhile declines.
	claimMu sync.Mutex
}

// maxInherited is the most tenants a queue with default limits may hold
// budgets for (each claim walks them): a queue with more takes the
// locking claims.
const maxInherited = 20000

// inherit adds tenant's inherited budgets (those of every default whose
// queue scope the tenant has no limit of its own for), once per tenant; a
// tenant the store knows (names) has been through it. s.reserved.mu must
// be held, or qb not yet shared.
func (qb *queueBudget) inherit(tenant string) {
	if qb.seen[tenant] || tenant == store.EveryTenant {
		return
	}
	qb.seen[tenant] = true
	if len(qb.defaults) > 0 {
		qb.unsynced = append(qb.unsynced, tenant)
	}
	for _, d := range qb.defaults {
		scope := store.FlowScope{Tenant: tenant, Queue: d.limit.Queue}
		if qb.own[scope] {
			continue
		}
		b := &rateBudget{limit: store.Limit{FlowScope: scope, Rate: d.limit.Rate, Period: d.limit.Period}, defVer: d.defVer,
			inherited: true}
		qb.tenants[tenant] = append(qb.tenants[tenant], b)
		qb.list = append(qb.list, b)
	}
	if i, found := slices.BinarySearch(qb.names, tenant); !found && len(qb.tenants[tenant]) > 0 {
		qb.names = slices.Insert(qb.names, i, tenant)
	}
}

// ineligibleFor is how long a queue whose limits the reserved claim does
// not handle goes to the locking claims before its limits are read again.
const ineligibleFor = time.Second

// eachBudget calls f with every rate budget the store holds, of current
// and of dropped queue budgets; s.reserved.mu must be held. f returns
// false to stop.
func (s *Store) eachBudget(f func(b *rateBudget) bool) {
	for _, m := range []map[string]*queueBudget{s.reserved.queues, s.reserved.old} {
		for _, qb := range m {
			for _, b := range qb.list {
				if !f(b) {
					return
				}
			}
		}
	}
}

// reservations are a store's queue budgets (Store.reserved).
type reservations struct {
	// mu guards the maps and every rateBudget's fields.
	mu     sync.Mutex
	queues map[string]*queueBudget
	// old holds budgets whose limits changed, until they are read again.
	old map[string]*queueBudget
}

// qFlowGen reads the flow generation; qFlowGenBump moves it on (Close gave
// budget back).
const (
	qFlowGen     = `SELECT gen FROM {schema}.flow_generation`
	qFlowGenBump = `UPDATE {schema}.flow_generation SET gen = gen + 1`
)

// qFlowReserve reserves rate budget: each limit ($1 tenant, $2 queue)
// whose row still has def_ver $5, locked in one order, granted the least
// of $3 and what is left of its window at $4, which moves to that window
// and counts the grant. It returns those limits' windows and grants (a
// limit missing from the result changed or went away).
var qFlowReserve = `WITH n AS (
    SELECT (extract(epoch FROM $4::timestamptz) * 1000000)::bigint AS us
), lk AS (
    SELECT f.tenant, f.queue, f.rate, f.period_us, f.window_start, f.window_used, r.want
    FROM {schema}.flow_controls f JOIN unnest($1::text[], $2::text[], $3::int[], $5::bigint[]) AS r(tenant, queue, want, def_ver)
        ON f.tenant = r.tenant AND f.queue = r.queue AND f.def_ver = r.def_ver
    WHERE f.rate > 0
    ORDER BY f.tenant, f.queue FOR UPDATE OF f
), g AS (
    SELECT lk.tenant, lk.queue, w.ws, greatest(0, least(lk.want,
        CASE WHEN lk.window_start = w.ws THEN lk.rate - lk.window_used
             WHEN lk.window_start > w.ws THEN 0
             ELSE lk.rate END))::int AS granted
    FROM lk CROSS JOIN n CROSS JOIN LATERAL (SELECT ` + windowStart("lk") + ` AS ws) w
), upd AS (
    UPDATE {schema}.flow_controls f SET window_start = g.ws,
        window_used = (CASE WHEN f.window_start = g.ws THEN f.window_used ELSE 0 END) + g.granted
    FROM g WHERE f.tenant = g.tenant AND f.queue = g.queue AND g.granted > 0
)
SELECT tenant, queue, ws, granted FROM g`

// qDefaultReserve reserves inherited rate budget: each tenant $1's
// window under the default limit of queue scope $2 (rate $5 per $6
// microseconds) is granted the least of $3 and what is left of it at $4,
// and moves to that window and counts the grant. It runs after
// qFlowReserve locked the default rows (as every writer of these windows
// does first), so its snapshot holds every write before. It returns the
// windows and grants.
var qDefaultReserve = `WITH n AS (
    SELECT (extract(epoch FROM $4::timestamptz) * 1000000)::bigint AS us
), r AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $5::int[], $6::bigint[]) AS r(tenant, queue, want, rate, period_us)
), g AS (
    SELECT r.tenant, r.queue, w.ws,
        greatest(0, least(r.want, CASE WHEN d.window_start = w.ws THEN r.rate - d.window_used
            WHEN d.window_start > w.ws THEN 0 ELSE r.rate END))::int AS granted,
        CASE WHEN d.window_start = w.ws THEN d.window_used ELSE 0 END AS used
    FROM r CROSS JOIN n CROSS JOIN LATERAL (SELECT ` + windowStart("r") + ` AS ws) w
    LEFT JOIN {schema}.flow_default_windows d ON d.queue = r.queue AND d.tenant = r.tenant
), ins AS (
    INSERT INTO {schema}.flow_default_windows AS d (tenant, queue, window_start, window_used)
    SELECT tenant, queue, ws, used + granted FROM g WHERE granted > 0
    ON CONFLICT (queue, tenant) DO UPDATE SET window_start = excluded.window_start, window_used = excluded.window_used
)
SELECT tenant, queue, ws, granted FROM g`

// qFlowUnreserve returns reserved budget: each limit ($1 tenant, $2
// queue) locked in one order gives back $4 of its window $3 when that is
// still its window and its row still has def_ver $5.
const qFlowUnreserve = `WITH lk AS (
    SELECT f.tenant, f.queue, r.ws, r.n
    FROM {schema}.flow_controls f
    JOIN unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::bigint[]) AS r(tenant, queue, ws, n, def_ver)
        ON f.tenant = r.tenant AND f.queue = r.queue AND f.def_ver = r.def_ver
    ORDER BY f.tenant, f.queue FOR UPDATE OF f
)
UPDATE {schema}.flow_controls f SET window_used = greatest(0, f.window_used - lk.n)
FROM lk WHERE f.tenant = lk.tenant AND f.queue = lk.queue AND f.window_start = lk.ws`

// qFlowThrottled counts one throttled claim on each limit ($1 tenant, $2
// queue), locked in one order.
const qFlowThrottled = `WITH lk AS (
    SELECT f.tenant, f.queue FROM {schema}.flow_controls f
    JOIN unnest($1::text[], $2::text[]) AS r(tenant, queue) ON f.tenant = r.tenant AND f.queue = r.queue
    ORDER BY f.tenant, f.queue FOR UPDATE OF f
)
UPDATE {schema}.flow_controls f SET throttled = f.throttled + 1 FROM lk WHERE f.tenant = lk.tenant AND f.queue = lk.queue`

// qClaimReserved is the reserved claim of queue $1: $10 the cached flow
// generation, $11 the tenants to skip (paused, or nothing reserved and
// nothing left to reserve), $12/$13 the tenants that hold less than the claim and what they
// hold. It claims what qClaimOne would, when the generation is current,
// every queue concurrency limit has room for the whole claim ($5) and every
// visited tenant holds its first-round want; otherwise it claims nothing
// (the caller takes the general path). It returns ok, the visited tenants
// and whether the generation is current, then the claimed jobs. With $15,
// a queue with default limits, every visited tenant must have a row of
// holder $14 in flow_known (the store holds its inherited budgets), or it
// claims nothing.
// qClaimReservedWeighted divides the first round by the tenants' weights
// $16/$17 (a queue with weighted tenants).
var (
	qClaimReserved         = claimReservedSQL("")
	qClaimReservedWeighted = claimReservedSQL("$16::text[], $17::int[]")
)

func claimReservedSQL(weights string) string {
	return `WITH RECURSIVE cur AS (
    SELECT gen = $10 AS current FROM {schema}.flow_generation
), guard AS (
    SELECT (SELECT current FROM cur)
        AND NOT EXISTS (SELECT 1 FROM {schema}.flow_controls q
            WHERE q.tenant = '' AND (q.queue = '' OR q.queue = $1) AND q.concurrency > 0
              AND q.concurrency - ` + runningOf("q") + ` < $5) AS ok
), ` + claimOneBody("$11::text[]", "(SELECT ok FROM fits)", weights) + `, kn AS (
    -- OFFSET 0 keeps the probe per visited tenant: as an anti-join the
    -- generic plan hashed every known tenant of the store on each claim.
    SELECT NOT ($15::bool AND EXISTS (SELECT 1 FROM want x WHERE x.n > 0 AND NOT EXISTS (SELECT 1 FROM {schema}.flow_known k
            WHERE k.holder = $14 AND k.queue = $1 AND k.tenant = x.tenant OFFSET 0))) AS ok
), fits AS (
    SELECT (SELECT ok FROM guard) AND NOT EXISTS (SELECT 1 FROM want x
        JOIN unnest($12::text[], $13::int[]) AS c(tenant, n) ON c.tenant = x.tenant WHERE x.n > c.n)
        AND (SELECT ok FROM kn) AS ok
), meta AS (
    SELECT (SELECT ok FROM fits) AS ok, (SELECT coalesce(array_agg(tenant ORDER BY ord), '{}') FROM ten) AS visited,
        (SELECT current FROM cur) AS current, (SELECT ok FROM kn) AS known
)
SELECT m.ok, m.visited, m.current, m.known, u.* FROM meta m LEFT JOIN upd u ON true`
}

// qReservedSetup is the first statement of a reserved claim's
// transaction: JIT off and generic plans for the claim statement (its plan
// does not depend on its parameters, but PostgreSQL would plan it anew for
// each claim), and, when $2, a lock on queue $1's concurrency limit rows
// (those of no tenant), which every locking claim of the queue locks too,
// so that the claim statement that follows counts running jobs in a
// snapshot taken after every claim that started jobs under them committed.
// One statement instead of three saves their messages.
const qReservedSetup = `SELECT set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true),
    (SELECT count(*) FROM (SELECT 1 FROM {schema}.flow_controls
        WHERE $2::bool AND tenant = '' AND (queue = '' OR queue = $1) AND concurrency > 0 ORDER BY queue FOR UPDATE) l)`

// windowStart is the SQL start of now's rate window of flow row alias a
// (NULL without a rate): fixed windows of the period since the epoch, as
// store.Limit.WindowAt; now is n.us, microseconds since the epoch.
func windowStart(a string) string {
	return `CASE WHEN ` + a + `.rate > 0 THEN 'epoch'::timestamptz + (n.us - ((n.us % ` + a + `.period_us) + ` + a + `.period_us) % ` +
		a + `.period_us) * interval '1 microsecond' END`
}

// runningOf is the SQL count of the running jobs of flow row alias a's
// scope (jobs_running_scope_idx).
func runningOf(a string) string {
	return `(SELECT count(*) FROM {schema}.jobs r WHERE r.state = 'running'
            AND (` + a + `.tenant = '' OR r.tenant = ` + a + `.tenant) AND (` + a + `.queue = '' OR r.queue = ` + a + `.queue))`
}

// budgetOf returns the store's budget of queue, reading the queue's limits
// when it has none (or dropped it). Budget kept from an earlier read
// carries over to a limit whose row kept its def_ver: a row put again, or
// given another rate or period, started its window again in the database,
// and what was reserved of the old one is gone.
func (s *Store) budgetOf(ctx context.Context, queue string, now time.Time) (*queueBudget, error) {
	s.reserved.mu.Lock()
	qb := s.reserved.queues[queue]
	s.reserved.mu.Unlock()
	// A queue whose limits the reserved claim does not handle is looked at
	// again after a while: they may have changed.
	if qb != nil && (qb.eligible || time.Since(qb.loaded) < ineligibleFor) {
		return qb, nil
	}
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	gen, err := s.flowGeneration(ctx, db)
	if err != nil {
		return nil, err
	}
	rows, err := s.loadFlow(ctx, db, qFlowLoad, []string{queue})
	if err != nil {
		return nil, err
	}
	limits, _, _ := splitFlow(rows)
	qb = &queueBudget{gen: gen, shape: shapeOf(limits), eligible: len(limits) > 0, tenants: map[string][]*rateBudget{},
		loaded: time.Now(), own: map[store.FlowScope]bool{}, seen: map[string]bool{}, fresh: true}
	for _, r := range rows {
		l := r.limit
		if r.paused && l.Queue == queue {
			if l.Tenant == "" {
				qb.closed = true
			} else {
				qb.paused = append(qb.paused, l.Tenant)
			}
		}
		if l.Weight > 0 {
			w := l
			qb.weights = append(qb.weights, &w)
		}
		switch {
		case l.Tenant != "" && l.Concurrency > 0:
			qb.eligible = false
		case l.IsDefault():
			if l.Rate > 0 {
				qb.defaults = append(qb.defaults, &rateBudget{limit: l, defVer: r.defVer})
			}
		case l.Tenant == "" && l.Concurrency > 0:
			qb.conc = true
			if l.Rate > 0 {
				qb.queue = append(qb.queue, &rateBudget{limit: l, defVer: r.defVer})
			}
		case l.Rate == 0:
		case l.Tenant == "":
			qb.queue = append(qb.queue, &rateBudget{limit: l, defVer: r.defVer})
		default:
			qb.tenants[l.Tenant] = append(qb.tenants[l.Tenant], &rateBudget{limit: l, defVer: r.defVer})
			qb.own[l.FlowScope] = true
		}
	}
	for t := range qb.tenants {
		qb.names = append(qb.names, t)
	}
	slices.Sort(qb.names)
	qb.list = slices.Clone(qb.queue)
	for _, t := range qb.names {
		qb.list = append(qb.list, qb.tenants[t]...)
	}
	for _, w := range qb.weights {
		if !slices.Contains(qb.weightT, w.Tenant) {
			qb.weightT = append(qb.weightT, w.Tenant)
			qb.weightN = append(qb.weightN, int32(store.TenantWeight(qb.weights, w.Tenant, queue)))
		}
	}
	if len(qb.defaults) > 0 && qb.eligible {
		// Every tenant with a window under a default, or a limit of its
		// own, gets its inherited budgets now: a claim counts a throttled
		// claim on every spent limit, visited or not, as the general path
		// does.
		windows, err := s.loadWindows(ctx, db, qDefaultWindows, now, []string{queue})
		if err != nil {
			return nil, err
		}
		if len(windows)+len(qb.names) > maxInherited {
			qb.eligible = false // too many tenants: the locking claims
		} else {
			for _, t := range slices.Clone(qb.names) {
				qb.inherit(t)
			}
			for _, w := range windows {
				qb.inherit(w.Tenant)
			}
		}
	}
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	if cur := s.reserved.queues[queue]; cur != nil && cur.eligible {
		return cur, nil // another claim read them meanwhile: one budget per queue
	}
	old := s.reserved.old[queue]
	if old == nil {
		old = s.reserved.queues[queue] // an ineligible budget read again
	}
	if old != nil {
		// Tenants that held inherited budget stay known: it carries over.
		type key struct {
			scope     store.FlowScope
			inherited bool
			defVer    int64
		}
		kept := make(map[key]*rateBudget, len(old.list))
		for _, o := range old.list {
			if o.inherited && o.left > 0 && len(qb.defaults) > 0 && qb.eligible {
				qb.inherit(o.limit.Tenant)
			}
			kept[key{o.limit.FlowScope, o.inherited, o.defVer}] = o
		}
		for _, b := range qb.list {
			if o := kept[key{b.limit.FlowScope, b.inherited, b.defVer}]; o != nil {
				b.ws, b.left = o.ws, o.left
			}
		}
		delete(s.reserved.old, queue)
	}
	if len(qb.defaults) > 0 && len(qb.names) > maxInherited {
		qb.eligible = false
	}
	if s.reserved.queues == nil {
		s.reserved.queues = map[string]*queueBudget{}
	}
	s.reserved.queues[queue] = qb
	return qb, nil
}

// dropBudget forgets queue's cached limits (they changed); the budget held
// moves aside until they are read again (budgetOf).
func (s *Store) dropBudget(queue string, qb *queueBudget) {
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	if s.reserved.queues[queue] != qb {
		return
	}
	delete(s.reserved.queues, queue)
	if s.reserved.old == nil {
		s.reserved.old = map[string]*queueBudget{}
	}
	s.reserved.old[queue] = qb
}

// claimReserved is the reserved claim (see above) of p.Queues[0]. It
// reports applies false when the queue's limits are not the kind it
// handles; then nothing was done. Otherwise ok false means it declined
// (nothing claimed, nothing spent) and the general path, which takes back
// what the store holds of the limits it locks (absorbReserved), must claim.
// A claim that declined only because it would visit tenants the store had
// not seen runs once more with their budgets (the general path would take
// back every budget the store holds, which the next claims reserve again).
func (s *Store) claimReserved(ctx context.Context, p *store.JobClaimParams, now time.Time) (out []*idemtype.JobRow, applies, ok bool, err error) {
	for range 2 {
		var learned bool
		out, applies, ok, learned, err = s.claimReservedOnce(ctx, p, now)
		if !learned {
			break
		}
	}
	return out, applies, ok, err
}

// claimReservedOnce is one attempt of claimReserved; learned says it
// declined when it would visit tenants it has now added.
func (s *Store) claimReservedOnce(ctx context.Context, p *store.JobClaimParams, now time.Time) (out []*idemtype.JobRow, applies, ok, learned bool, err error) {
	queue := p.Queues[0]
	qb, err := s.budgetOf(ctx, queue, now)
	if err != nil || !qb.eligible {
		return nil, false, false, false, err
	}
	qb.claimMu.Lock()
	defer qb.claimMu.Unlock()
	s.reserved.mu.Lock()
	stale := s.reserved.queues[queue] != qb
	many := len(qb.defaults) > 0 && len(qb.names) > maxInherited
	s.reserved.mu.Unlock()
	if many {
		// Met more tenants than a claim should walk: read the limits
		// again (with as many windows the queue goes to the locking
		// claims, and is looked at again after a second).
		s.dropBudget(queue, qb)
		return nil, false, false, false, nil
	}
	if stale {
		// Another claim dropped or replaced it meanwhile: decide on the
		// general path this time rather than spend from a budget no one
		// else will see.
		return nil, true, false, false, nil
	}
	if qb.closed {
		// A paused queue: nothing to claim and nothing throttled, if it is
		// still paused.
		if current, err := s.flowCurrent(ctx, qb); err != nil || !current {
			if err == nil {
				s.dropBudget(queue, qb)
			}
			return nil, true, false, false, err
		}
		if p.Report != nil {
			*p.Report = store.ClaimReport{}
		}
		s.reservedPaused.Add(1)
		return nil, true, true, false, nil
	}
	if err := s.syncKnown(ctx, qb, queue); err != nil {
		return nil, true, false, false, err
	}
	if current, err := s.reserve(ctx, qb, p.Limit, now); err != nil || !current {
		if err == nil {
			s.dropBudget(queue, qb) // a limit changed: read them again
		}
		return nil, true, false, false, err
	}
	var (
		skip   = slices.Clone(qb.paused)
		capT   []string
		capN   []int32
		dflt   = len(qb.defaults) > 0
		hits   []*rateBudget
		report store.ClaimReport
	)
	// The limits that are spent throttle the claim, as the general path's
	// ClaimBudget.QueueOpen and Excluded count them.
	throttle := func(b *rateBudget) {
		hits = append(hits, b)
		report.Throttled = true
		if end := b.ws.Add(b.limit.Period); report.NextRefill.IsZero() || end.Before(report.NextRefill) {
			report.NextRefill = end
		}
	}
	s.reserved.mu.Lock()
	// A budget with nothing left whose window the reservation above did
	// not find empty was taken back meanwhile by a general-path claim of
	// this store: the general path decides this claim too.
	taken := false
	queueLeft := p.Limit
	for _, b := range qb.queue {
		left := b.allowance(now)
		if left == 0 {
			if !b.empty {
				taken = true
			}
			throttle(b)
		}
		queueLeft = min(queueLeft, left)
	}
	// What the claim may spend is taken out of the budgets while it runs
	// (held), so that a general-path claim of this store taking back the
	// reservations meanwhile (absorbReserved) takes only the rest; what
	// the claim did not spend is put back after it.
	var held []*rateBudget
	if queueLeft >= p.Limit {
		for _, b := range qb.queue {
			b.held = p.Limit
			held = append(held, b)
		}
		for _, t := range qb.names {
			c := p.Limit
			for _, b := range qb.tenants[t] {
				left := b.allowance(now)
				if left == 0 && !b.empty {
					taken = true
				}
				if left == 0 && (p.Tenant == "" || p.Tenant == t) {
					throttle(b)
				}
				c = min(c, left)
			}
			switch {
			case c == 0:
				skip = append(skip, t)
			case c < p.Limit:
				capT, capN = append(capT, t), append(capN, int32(c))
			}
			if c > 0 {
				for _, b := range qb.tenants[t] {
					b.held = c
					held = append(held, b)
				}
			}
		}
		if taken {
			for _, b := range held {
				b.held = 0
			}
			held = nil
		}
		for _, b := range held {
			b.left -= b.held
		}
	}
	s.reserved.mu.Unlock()
	if taken {
		return nil, true, false, false, nil
	}
	// settle puts back what the claim held and did not spend. When the
	// claim's outcome is unknown (the batch, COMMIT included, went out and
	// no answer came back) everything held counts as spent.
	settle := func(out []*idemtype.JobRow, unknown bool) {
		got := map[string]int{}
		for _, j := range out {
			got[j.Tenant]++
		}
		s.reserved.mu.Lock()
		defer s.reserved.mu.Unlock()
		for _, b := range held {
			used := got[b.limit.Tenant]
			if b.limit.Tenant == "" {
				used = len(out)
			}
			if !unknown {
				b.left += b.held - min(b.held, used)
			}
			b.held = 0
		}
	}
	if queueLeft == 0 {
		// The queue's window is spent: nothing to claim, if the limits
		// are still those the store read.
		if current, err := s.flowCurrent(ctx, qb); err != nil || !current {
			if err == nil {
				s.dropBudget(queue, qb)
			}
			return nil, true, false, false, err
		}
		if err := s.countThrottled(ctx, hits); err != nil {
			return nil, true, false, false, err
		}
		s.shapes.set(p.Queues, qb.shape)
		if p.Report != nil {
			*p.Report = report
		}
		return nil, true, true, false, nil
	}
	if queueLeft < p.Limit {
		return nil, true, false, false, nil // the queue's rate binds this claim
	}
	out, visited, ok, current, known, sent, err := s.claimReservedStatement(ctx, p, now, qb, skip, capT, capN, dflt)
	var pgErr *pgconn.PgError
	settle(out, sent && err != nil && !errors.As(err, &pgErr))
	if err != nil || !ok {
		switch {
		case err == nil && !current:
			s.dropBudget(queue, qb) // the limits changed: read them again
		case err == nil && dflt && !known:
			// Tenants the store did not know may have made it decline:
			// the next claim reserves their inherited budgets. Known
			// ones are written to flow_known again (in case their rows
			// went: Open removes day-old rows).
			s.reserved.mu.Lock()
			for _, t := range visited {
				if qb.seen[t] {
					qb.unsynced = append(qb.unsynced, t)
				} else {
					learned = true
				}
				qb.inherit(t)
			}
			s.reserved.mu.Unlock()
		}
		return nil, true, false, learned, err
	}
	full := s.afterFirstRound(p, now, out, visited, qb.weights)
	if len(hits) > 0 {
		// The claim committed: its jobs are the caller's whatever happens
		// to the statistics.
		if err := s.countThrottled(ctx, hits); err != nil {
			s.logger.Warn("pgstore: count throttled claims", "err", err)
		}
	}
	if len(full) > 0 && len(out) < p.Limit {
		// Later rounds among the tenants that got their share: the general
		// path, which takes back what the store holds of its limits and
		// reads the windows again.
		more := *p
		more.Limit = p.Limit - len(out)
		var r store.ClaimReport
		more.Report = &r
		jobs, err := s.claimLimited(ctx, &more, now, qb.shape, full)
		if err != nil {
			return nil, true, false, false, err
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
	// The next claim of the queue comes straight here (claimFlow).
	s.shapes.set(p.Queues, qb.shape)
	if dflt {
		s.reservedInherited.Add(1)
	}
	if len(qb.paused) > 0 {
		s.reservedPaused.Add(1)
	}
	if len(qb.weightT) > 0 {
		s.reservedWeighted.Add(1)
	}
	return out, true, true, false, nil
}

// reserve tops up the budgets of qb that hold less than a claim of size
// claim may spend from one of them, each by the larger of the claim and
// reserveSlice (or what is left of its window), in one transaction:
// qFlowReserve locks the limits' rows (and the default rows of inherited
// budgets) in one order and reserves from the limits' own windows, then
// qDefaultReserve from the tenants' windows under the defaults, read in a
// snapshot taken under those locks. current is false when a limit changed
// since qb was read: then nothing was reserved.
func (s *Store) reserve(ctx context.Context, qb *queueBudget, claim int, now time.Time) (current bool, err error) {
	var (
		own, inh cols
		defs     = map[string]int64{} // default rows to lock: queue scope → def_ver
		need     []*rateBudget
	)
	s.reserved.mu.Lock()
	for _, b := range qb.list {
		// A limit whose window had nothing more to give is not asked
		// again in that window (under a binding default that would lock
		// the default's row on every claim). Budget another store gives
		// back (Close) comes with a new flow generation, which makes the
		// store read its limits again (new budgets ask again); budget
		// this store's locking claim took back (absorbReserved) is asked
		// again too.
		if b.allowance(now) >= claim || b.empty && b.ws.Equal(b.limit.WindowAt(now)) {
			continue
		}
		// Enough for a whole claim when the window has it, so that a
		// claim takes all its budget allows, as on the locking path.
		slice := int32(max(claim, reserveSlice(b.limit.Rate)))
		need = append(need, b)
		if b.inherited {
			inh.add(b, slice)
			defs[b.limit.Queue] = b.defVer
		} else {
			own.add(b, slice)
		}
	}
	s.reserved.mu.Unlock()
	if len(need) == 0 {
		return true, nil
	}
	if _, err := s.db(); err != nil {
		return false, err
	}
	for q, v := range defs {
		own.tenants, own.queues = append(own.tenants, store.EveryTenant), append(own.queues, q)
		own.wants, own.vers = append(own.wants, 0), append(own.vers, v)
	}
	// A limit whose row changed since it was read (another def_ver, or
	// gone) gets nothing: the statement reserves only under the
	// definitions the store holds, and in one transaction, so that either
	// every limit is reserved or (when one changed) the rest is given back
	// by rolling back.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	grants, err := collectGrants(tx.Query(ctx, s.sql(qFlowReserve), own.tenants, own.queues, own.wants, now, own.vers))
	if err != nil {
		return false, fmt.Errorf("reserve rate budget: %w", err)
	}
	if len(grants) < len(own.tenants) {
		return false, nil // rolled back
	}
	var inherited []grant
	if len(inh.tenants) > 0 {
		inherited, err = collectGrants(tx.Query(ctx, s.sql(qDefaultReserve), inh.tenants, inh.queues, inh.wants, now,
			inh.rates, inh.periods))
		if err != nil {
			return false, fmt.Errorf("reserve inherited rate budget: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("reserve rate budget: %w", err)
	}
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	for _, b := range need {
		ws := b.limit.WindowAt(now)
		if ws.After(b.ws) {
			b.ws, b.left = ws, 0
		} else if !ws.Equal(b.ws) {
			continue // a claim with an earlier now than the budget's window
		}
		gs := grants
		if b.inherited {
			gs = inherited
		}
		for _, g := range gs {
			if g.scope == b.limit.FlowScope && g.ws.Equal(ws) {
				b.left += g.n
				b.empty = g.n == 0
			}
		}
	}
	return true, nil
}

// cols are reserve's statement arguments, one element per budget.
type cols struct {
	tenants, queues []string
	wants, rates    []int32
	vers, periods   []int64
}

func (c *cols) add(b *rateBudget, want int32) {
	c.tenants, c.queues = append(c.tenants, b.limit.Tenant), append(c.queues, b.limit.Queue)
	c.wants, c.vers = append(c.wants, want), append(c.vers, b.defVer)
	c.rates, c.periods = append(c.rates, int32(b.limit.Rate)), append(c.periods, b.limit.Period.Microseconds())
}

// grant is one limit's window and what a reservation got of it.
type grant struct {
	scope store.FlowScope
	ws    time.Time
	n     int
}

// collectGrants reads the rows of qFlowReserve or qDefaultReserve.
func collectGrants(rows pgx.Rows, err error) ([]grant, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) {
		var g grant
		err := r.Scan(&g.scope.Tenant, &g.scope.Queue, &g.ws, &g.n)
		return g, err
	})
}

// claimReservedStatement runs qClaimReserved; dflt says the queue has
// default limits (the claim visits only tenants the store wrote to
// flow_known). It returns the visited tenants, also when it declined, and
// known false when it declined for a tenant without a flow_known row. sent
// says the batch went out (an error after it leaves the outcome unknown).
func (s *Store) claimReservedStatement(ctx context.Context, p *store.JobClaimParams, now time.Time, qb *queueBudget,
	skip, capT []string, capN []int32, dflt bool) (out []*idemtype.JobRow, visited []string, ok, current, known, sent bool, err error) {
	limit := p.Limit
	queue := p.Queues[0]
	var kinds []string
	if p.Kinds != nil {
		kinds = p.Kinds
	}
	if skip == nil {
		skip = []string{}
	}
	if capT == nil {
		capT, capN = []string{}, []int32{}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.sql(qReservedSetup), queue, qb.conc)
	args := []any{queue, now, s.cursors.Get(queue), kinds, limit, p.LeaseUntil, p.WorkerID, p.Tenant,
		s.solo.Get(queue), qb.gen, skip, capT, capN, s.holder, dflt}
	stmt := qClaimReserved
	if len(qb.weightT) > 0 {
		stmt = qClaimReservedWeighted
		args = append(args, qb.weightT, qb.weightN)
	}
	b.Queue(s.sql(stmt), args...)
	b.Queue("COMMIT")
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, nil, false, false, false, false, err
	}
	defer conn.Release()
	sent = true
	err = func() error {
		br := conn.SendBatch(ctx, b)
		defer br.Close()
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if out, err = readClaimRows(br, &ok, &visited, &current, &known); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return br.Close()
	}()
	if err != nil {
		return nil, nil, false, false, false, true, err
	}
	if !ok {
		return nil, visited, false, current, known, true, nil
	}
	return out, visited, true, true, known, true, nil
}

// flow_known (migration 0020): qKnownClose forgets holder $1's tenants
// (Close), qKnownStale day-old rows (Open), qKnownReset the tenants holder
// $1 wrote for queue $2, and qKnownAdd writes tenants $3.
const (
	qKnownClose = `DELETE FROM {schema}.flow_known WHERE holder = $1`
	qKnownStale = `DELETE FROM {schema}.flow_known WHERE written < now() - interval '1 day'`
	qKnownReset = `DELETE FROM {schema}.flow_known WHERE holder = $1 AND queue = $2`
	qKnownAdd   = `INSERT INTO {schema}.flow_known (holder, queue, tenant) SELECT $1, $2, t FROM unnest($3::text[]) AS t
ON CONFLICT (holder, queue, tenant) DO UPDATE SET written = now()`
)

// syncKnown writes the tenants qb added since the last claim to
// flow_known, after forgetting the store's earlier rows of the queue when
// qb is a new read of its limits (a tenant known then may have a limit of
// its own now). Called under qb.claimMu, before the claim statement.
func (s *Store) syncKnown(ctx context.Context, qb *queueBudget, queue string) error {
	s.reserved.mu.Lock()
	add, fresh := qb.unsynced, qb.fresh && len(qb.defaults) > 0
	qb.unsynced = nil
	s.reserved.mu.Unlock()
	if len(add) == 0 && !fresh {
		return nil
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if fresh {
			if _, err := tx.Exec(ctx, s.sql(qKnownReset), s.holder, queue); err != nil {
				return err
			}
		}
		if len(add) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, s.sql(qKnownAdd), s.holder, queue, add)
		return err
	})
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	if err != nil {
		qb.unsynced = append(qb.unsynced, add...)
		return fmt.Errorf("write known tenants: %w", err)
	}
	qb.fresh = false
	return nil
}

// flowGeneration reads the flow generation (migration 0019).
func (s *Store) flowGeneration(ctx context.Context, q querier) (int64, error) {
	var gen int64
	if err := q.QueryRow(ctx, s.sql(qFlowGen)).Scan(&gen); err != nil {
		return 0, fmt.Errorf("read flow generation: %w", err)
	}
	return gen, nil
}

// flowCurrent reports whether the flow generation is still qb's.
func (s *Store) flowCurrent(ctx context.Context, qb *queueBudget) (bool, error) {
	db, err := s.db()
	if err != nil {
		return false, err
	}
	gen, err := s.flowGeneration(ctx, db)
	return gen == qb.gen, err
}

// countThrottled counts one throttled claim on each of the limits: on
// their rows (qFlowThrottled), and for inherited limits on the tenants'
// windows, after locking the default rows (qDefaultLock, qDefaultThrottled)
// as every writer of those windows does.
func (s *Store) countThrottled(ctx context.Context, hits []*rateBudget) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	var own, inh cols
	defs := map[string]int64{}
	for _, b := range hits {
		if b.inherited {
			inh.add(b, 0)
			defs[b.limit.Queue] = b.defVer
		} else {
			own.add(b, 0)
		}
	}
	// A default limit counts the claims that any tenant's copy of it
	// throttled, as on the general path (store.ClaimBudget.Usage).
	for q := range defs {
		own.add(&rateBudget{limit: store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: q}}}, 0)
	}
	if len(own.tenants) > 0 {
		if _, err := db.Exec(ctx, s.sql(qFlowThrottled), own.tenants, own.queues); err != nil {
			return fmt.Errorf("count throttled claims: %w", err)
		}
	}
	if len(inh.tenants) > 0 {
		err := s.tx(ctx, func(tx pgx.Tx) error {
			if err := s.lockDefaults(ctx, tx, defs); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, s.sql(qDefaultThrottled), inh.tenants, inh.queues)
			return err
		})
		if err != nil {
			return fmt.Errorf("count throttled claims: %w", err)
		}
	}
	return nil
}

// qDefaultLock locks the default rows of queue scopes $1 (tenant "*") in
// one order, as the locking claims lock them.
const qDefaultLock = `SELECT 1 FROM {schema}.flow_controls WHERE tenant = '*' AND queue = ANY($1::text[]) ORDER BY tenant, queue FOR UPDATE`

// qDefaultThrottled counts one throttled claim on each tenant $1's window
// under the default of queue scope $2.
const qDefaultThrottled = `UPDATE {schema}.flow_default_windows w SET throttled = w.throttled + 1
FROM unnest($1::text[], $2::text[]) AS r(tenant, queue) WHERE w.tenant = r.tenant AND w.queue = r.queue`

// qDefaultUnreserve gives back inherited budget: each tenant $1's window
// under the default of queue scope $2 gives back $4 when its window is
// still $3.
const qDefaultUnreserve = `UPDATE {schema}.flow_default_windows w SET window_used = greatest(0, w.window_used - r.n)
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[]) AS r(tenant, queue, ws, n)
WHERE w.tenant = r.tenant AND w.queue = r.queue AND w.window_start = r.ws`

// lockDefaults locks the default rows of queue scopes defs (in tx).
func (s *Store) lockDefaults(ctx context.Context, tx pgx.Tx, defs map[string]int64) error {
	queues := make([]string, 0, len(defs))
	for q := range defs {
		queues = append(queues, q)
	}
	_, err := tx.Exec(ctx, s.sql(qDefaultLock), queues)
	return err
}

// unreserve gives back what the store holds of current windows (Close):
// of limits' own windows in one statement, of tenants' windows under
// defaults in a transaction that locks the default rows first (and gives
// back only under a default whose def_ver is still the one reserved
// under).
func (s *Store) unreserve(ctx context.Context, q querier) error {
	type key struct {
		scope     store.FlowScope
		inherited bool
		ws        time.Time
		defVer    int64
	}
	held := map[key]int{}
	s.reserved.mu.Lock()
	s.eachBudget(func(b *rateBudget) bool {
		if b.left > 0 {
			held[key{b.limit.FlowScope, b.inherited, b.ws.UTC(), b.defVer}] += b.left
			b.left = 0
		}
		return true
	})
	s.reserved.mu.Unlock()
	var (
		own, inh cols
		starts   [2][]time.Time
		ns       [2][]int32
	)
	defs := map[string]bool{}
	for k, n := range held {
		b := &rateBudget{limit: store.Limit{FlowScope: k.scope}, defVer: k.defVer}
		i := 0
		if k.inherited {
			inh.add(b, 0)
			i = 1
			defs[k.scope.Queue] = true
		} else {
			own.add(b, 0)
		}
		starts[i], ns[i] = append(starts[i], k.ws), append(ns[i], int32(n))
	}
	if len(own.tenants)+len(inh.tenants) == 0 {
		return nil
	}
	// Other stores do not ask again in a window for a budget they found
	// spent: a new flow generation makes them read the limits again.
	defer func() {
		if _, err := q.Exec(ctx, s.sql(qFlowGenBump)); err != nil {
			s.logger.Warn("pgstore: announce given back rate budget", "err", err)
		}
	}()
	if len(own.tenants) > 0 {
		if _, err := q.Exec(ctx, s.sql(qFlowUnreserve), own.tenants, own.queues, starts[0], ns[0], own.vers); err != nil {
			return err
		}
	}
	if len(inh.tenants) == 0 {
		return nil
	}
	// Not s.tx: Close calls this after the store is closed.
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Only what was reserved under each default's current def_ver:
		// a default put again started its tenants' windows again. (One
		// budget per def_ver and window, so at most one per row.)
		queues := make([]string, 0, len(defs))
		for q := range defs {
			queues = append(queues, q)
		}
		rows, err := tx.Query(ctx, s.sql(qDefaultLockVer), queues)
		if err != nil {
			return err
		}
		type def struct {
			queue string
			ver   int64
		}
		locked, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (def, error) {
			var d def
			err := r.Scan(&d.queue, &d.ver)
			return d, err
		})
		if err != nil {
			return err
		}
		current := map[string]int64{}
		for _, d := range locked {
			current[d.queue] = d.ver
		}
		var t, qs []string
		var ws []time.Time
		var n []int32
		for i := range inh.tenants {
			if v, ok := current[inh.queues[i]]; ok && v == inh.vers[i] {
				t, qs = append(t, inh.tenants[i]), append(qs, inh.queues[i])
				ws, n = append(ws, starts[1][i]), append(n, ns[1][i])
			}
		}
		_, err = tx.Exec(ctx, s.sql(qDefaultUnreserve), t, qs, ws, n)
		return err
	})
}

// qDefaultLockVer locks the default rows of queue scopes $1, in one
// order, and returns their queue scopes and def_vers.
const qDefaultLockVer = `SELECT f.queue, f.def_ver FROM {schema}.flow_controls f
WHERE f.tenant = '*' AND f.queue = ANY($1::text[])
ORDER BY f.tenant, f.queue FOR UPDATE OF f`

// ownReserved returns what the store holds unspent of window ws of the
// limit of scope (of a tenant's window under the default of that queue
// scope when inherited); LimitList shows it as not used.
func (s *Store) ownReserved(scope store.FlowScope, inherited bool, ws time.Time) int {
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	n := 0
	s.eachBudget(func(b *rateBudget) bool {
		if b.limit.FlowScope == scope && b.inherited == inherited && b.ws.Equal(ws) {
			n += b.left
		}
		return true
	})
	return n
}

// absorbReserved takes back, for the general path, what the store holds of
// the current windows of limits (whose rows have the def_vers vers), and
// of the tenants' windows under the default limits among them: each such
// limit's WindowUsed (as read under the lock), and each such window's in
// windows, drops by it and the store holds nothing of it any more.
// It returns the limits and the windows whose WindowUsed changed, which
// the claim must write back even if it spends nothing from them.
func (s *Store) absorbReserved(limits []*store.Limit, vers map[store.FlowScope]int64, windows []store.InheritedWindow,
	now time.Time) (changed []*store.Limit, changedW []store.InheritedWindow) {
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	if len(s.reserved.queues)+len(s.reserved.old) == 0 {
		return nil, nil
	}
	for _, l := range limits {
		if l.Rate == 0 {
			continue
		}
		ws := l.WindowAt(now)
		if l.IsDefault() {
			// The tenants' windows under it.
			took := map[string]int{}
			s.eachBudget(func(b *rateBudget) bool {
				if b.inherited && b.limit.Queue == l.Queue && b.left > 0 && b.ws.Equal(ws) {
					if b.defVer == vers[l.FlowScope] {
						took[b.limit.Tenant] += b.left
					}
					b.left, b.empty = 0, false
				}
				return true
			})
			for i := range windows {
				w := &windows[i]
				if n := took[w.Tenant]; n > 0 && w.Queue == l.Queue && w.WindowStart.Equal(ws) {
					w.WindowUsed = max(0, w.WindowUsed-n)
					changedW = append(changedW, *w)
				}
			}
			continue
		}
		n := 0
		s.eachBudget(func(b *rateBudget) bool {
			if !b.inherited && b.limit.FlowScope == l.FlowScope && b.left > 0 && b.ws.Equal(ws) {
				if l.WindowStart.Equal(ws) && b.defVer == vers[l.FlowScope] {
					n += b.left
				}
				b.left, b.empty = 0, false
			}
			return true
		})
		if n > 0 {
			l.WindowUsed = max(0, l.WindowUsed-n)
			changed = append(changed, l)
		}
	}
	return changed, changedW
}

// holdsReserved reports whether the store holds reserved budget of any
// limit (the locking one-round claim, which reads the windows in SQL, would
// not see it as the store's own).
func (s *Store) holdsReserved() bool {
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	holds := false
	s.eachBudget(func(b *rateBudget) bool {
		holds = b.left > 0 || b.held > 0
		return !holds
	})
	return holds
}
