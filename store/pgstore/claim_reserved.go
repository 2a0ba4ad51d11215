package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reserved rate budget: the limited claim of one queue: queue limits
// (rate, concurrency), tenants' rates and concurrencies (their own and
// defaults of tenant "*"), weights and pauses. The locking claims
// write every rate limit they spend from on every claim, which with a
// hundred limited tenants is most of a claim's cost; this one spends rate
// budget the store reserved in advance, in slices, and writes nothing but
// the claimed jobs (a queue concurrency limit is an advisory lock).
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
//   - The claim (claimReservedSQL) skips tenants with nothing reserved and
//     nothing left to reserve, and checks in its own snapshot that the
//     limit definitions are those the store cached (flow_generation,
//     migration 0019: a limit put, changed or removed since makes it
//     decline and the store read them again). When a visited tenant holds
//     less than its first-round share, or the queue's rate less than the
//     claim, it declines too: the general path, which takes the store's
//     reservations back first (absorbReserved), claims instead.
//   - A queue concurrency limit: the claim first takes its advisory lock
//     (qReservedSetup, with the scopes of the cached limits; the locking
//     claims take the same locks by qConcLock before they lock the limit
//     rows), then counts the queue's running jobs in the
//     next statement, whose snapshot sees every claim that held the lock
//     before. Claims of such a queue take turns, as on the locking path;
//     nothing is written for it.
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
//   - Tenants' concurrency limits are counted, not reserved
//     (reservedVariant.conc): under the same advisory locks as a queue
//     concurrency limit, the claim skips the tenants at one (counting the
//     throttled claim on those limits in its statement) and goes ahead
//     when every visited tenant has room for its want; otherwise the
//     locking claims take it and the next concBackoff claims.
//   - The store walks only the budgets that may hold less than a claim
//     (queueBudget.low), and holds the others lazily (inflight).
//
// Throttled claims are counted on the rate limits that stopped them after
// the claim, those whose scope holds a job the claim could otherwise have
// taken (heldHits: one qHeldBack statement, only when a rate budget is
// spent): on limit rows in one ordered statement, on tenants' windows
// under defaults in a transaction that locks the default rows first; on
// tenants' concurrency limits in the claim statement (concThrottleSQL),
// when the tenant at one has such a job (its hit CTE).

// The reserved claim statement (claimReservedSQL) claims from queue $1:
// $10 is the cached flow generation, $11 the tenants to skip (paused, or
// nothing reserved and nothing left to reserve), $12/$13 the tenants that
// hold less than the claim and what they hold. It claims what qClaimOne
// would, when the generation is current, every queue concurrency limit
// has room for the whole claim ($5) and every visited tenant holds its
// first-round want; otherwise it claims nothing (the caller takes the
// general path). It returns ok, the visited tenants, whether the
// generation is current, whether every visited tenant is known (below)
// and conc_ok (below; concRoom without tenants' concurrency), then the
// claimed jobs. With $15, a queue with default limits, every visited
// tenant must have a row of holder $14 in flow_known (the store holds its
// inherited budgets), or it claims nothing. With weights ($16/$17) it
// divides the first round by the tenants' weights.
//
// Under tenants' concurrency limits (their own, of the queue's scope, and
// the defaults of tenant '*' where a tenant has no limit of its own for the
// default's queue scope), read in the statement's snapshot, it skips the
// tenants at one of them, counts the throttled claim on those limits, and
// claims only when every visited tenant has room under them for its want
// and no limit a tenant is at has a rate too, which is when the general
// path would exclude the same tenants, count the same throttles and lower
// no quota for a concurrency limit; otherwise it claims nothing and the
// general path claims. The running jobs are
// counted after the queue scopes' advisory locks (qReservedSetup), as for
// a queue concurrency limit. The bound: $18 ($16 unweighted) is the least of
// those concurrency limits, w the largest want of a visited tenant (at
// least 1); when no tenant runs more than $18 - w jobs in all, no tenant
// is at a limit and every visited one has room for its want under each
// of them (conc_ok concByBound): with claims of 10 over 10 or more
// tenants w is 1, and limits of a few jobs each rarely need counting. The
// concBound variant checks the bound alone
// (concNotBound when it fails); concCounted counts each tenant's running
// jobs against its limits (it must, to skip the tenants at one, also when
// the bound holds; concRoom, or concAtLimit) and returns how many limits
// it counted as throttled and the queue scopes of the defaults among them.
//
// Each variant holds only what the queue's cached limits need (the store
// sends another when they change, and the generation check declines a
// claim made under stale ones): PostgreSQL starts every node of a plan
// on each execution, run or not, and the parts that would never run cost
// tens of µs a claim.
type reservedVariant struct {
	weighted  bool // weighted tenants ($16/$17)
	conc      int  // concNone, concBound or concCounted
	known     bool // default limits: the flow_known check
	queueConc bool // a queue concurrency limit: its running count
}

// qClaimReservedVariants are the statements of every reservedVariant.
var qClaimReservedVariants = func() map[reservedVariant]string {
	m := map[reservedVariant]string{}
	for _, w := range []bool{false, true} {
		for _, c := range []int{concNone, concBound, concCounted} {
			for _, k := range []bool{false, true} {
				for _, q := range []bool{false, true} {
					v := reservedVariant{weighted: w, conc: c, known: k, queueConc: q}
					m[v] = claimReservedSQL(v)
				}
			}
		}
	}
	return m
}()

// weightArgs are the reserved claim's weight parameters (claimOneBody).
const weightArgs = "$16::text[], $17::int[]"

// How a reserved claim statement checks tenants' concurrency limits:
// concNone not at all (the queue's scope holds none), concBound by the
// bound only (conc_ok concNotBound when it fails: nothing decided, nothing
// claimed), concCounted by the bound and by counting (which it needs to
// skip the tenants at a limit).
const (
	concNone = iota
	concBound
	concCounted
)

// conc_ok values of a reserved claim statement.
const (
	concAtLimit  = 0 // a visited tenant lacks room, or a limit a tenant is at has a rate: declined
	concRoom     = 1 // counted: every tenant has room
	concByBound  = 2 // the bound holds
	concNotBound = 3 // the bound failed (concBound): declined, undecided
)

// tenantBoundSQL and tenantConcSQL are the parts of claimReservedSQL
// after want: cb the bound (no tenant runs more than $18 - w jobs). Then,
// counting: rt0 the running jobs per tenant with running jobs (in every
// queue and in queue $1), limr their concurrency limits and what is left
// of each, atl the limits with nothing left (of tenant $8 only, when set:
// the general path's ClaimBudget.Excluded), whose tenants the rotation
// skips (only a tenant with running jobs can be at a limit); hit those of
// atl that held work back, whose tenant has a job the claim could take
// (of queue $1, of its kinds, due: one probe of jobs_claim_tenant_idx per
// limit of atl; ClaimBudget.HeldBack): only they count a throttled
// claim; limv the limits of the visited tenants without running jobs;
// tconc whether the claim may go ahead: no hit limit has a rate too (its
// usage write would move a window: the general path decides), and every
// visited tenant has room for its want (a lowered quota is the general
// path's too). Running jobs here are sqlSlotTaken's at the claim's now
// ($2): cancelled jobs still holding their partition count as running,
// and so do retried ones until their old lease ends.
var tenantBoundSQL = `, cb AS (
    SELECT coalesce(max(n), 0) + greatest((SELECT max(x.n) FROM want x), 1) <= {floor}::bigint AS ok FROM (
        SELECT count(*) AS n FROM {schema}.jobs r WHERE ` + sqlSlotTaken("$2::timestamptz") + ` GROUP BY r.tenant) z
)`

var tenantConcSQL = tenantBoundSQL + `, rt0 AS (
    SELECT r.tenant, count(*) AS n_all, count(*) FILTER (WHERE r.queue = $1) AS n_q
    FROM {schema}.jobs r WHERE ` + sqlSlotTaken("$2::timestamptz") + ` GROUP BY r.tenant
), limr AS (
    SELECT rt0.tenant, f.queue, f.inh, f.rated, f.concurrency - CASE WHEN f.queue = '' THEN rt0.n_all ELSE rt0.n_q END AS room
    FROM rt0 CROSS JOIN LATERAL (` + concLimitsOf("rt0") + `) f
), atl AS (
    SELECT l.tenant, l.queue, l.inh, l.rated FROM limr l WHERE l.room <= 0 AND ($8::text = '' OR l.tenant = $8)
), hit AS (
    -- OFFSET 0 keeps the probe per limit at one: as a semi-join the
    -- generic plan read every claimable job of the queue on each claim.
    SELECT * FROM atl h WHERE EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.queue = $1 AND j.tenant = h.tenant
        AND j.state = 'available' AND j.run_at <= $2
        AND ($4::text[] IS NULL OR j.kind = ANY($4::text[])) OFFSET 0)
), limv AS (
    SELECT x.tenant, f.concurrency AS room FROM want x CROSS JOIN LATERAL (` + concLimitsOf("x") + `) f
    WHERE x.n > 0 AND NOT EXISTS (SELECT 1 FROM rt0 WHERE rt0.tenant = x.tenant)
), tconc AS (
    SELECT NOT EXISTS (SELECT 1 FROM hit WHERE hit.rated)
        AND NOT EXISTS (SELECT 1 FROM want x JOIN (SELECT tenant, room FROM limr UNION ALL SELECT tenant, room FROM limv) l
            ON l.tenant = x.tenant WHERE x.n > 0 AND l.room < x.n) AS ok
)`

// concThrottleSQL counts, when the claim goes ahead, one throttled claim
// on each limit of hit, in the claim's transaction, as the general path
// writes its usage (store.ClaimBudget.Usage): on a tenant's own row; on a
// tenant's window under a default (a concurrency-only default: its window
// row as the general path writes it, zero) and on the default's row. It
// locks the limit rows first, in (tenant, queue) order as the locking
// claims do (thrl), and writes the windows only after them (thrw reads
// thr's rows, so thr has run): the default row before its tenants'
// windows, the order of every writer of both (reservations, LimitPut and
// LimitDelete, countThrottled), so no lock cycle forms.
const concThrottleSQL = `, thrl AS (
    SELECT f.tenant, f.queue FROM {schema}.flow_controls f
    WHERE (f.tenant, f.queue) IN (SELECT tenant, queue FROM hit WHERE NOT inh UNION SELECT '*', queue FROM hit WHERE inh)
        AND (SELECT ok FROM fits)
    ORDER BY f.tenant, f.queue FOR UPDATE
), thr AS (
    UPDATE {schema}.flow_controls f SET throttled = f.throttled + 1
    FROM thrl WHERE f.tenant = thrl.tenant AND f.queue = thrl.queue
    RETURNING f.tenant
), thrw AS (
    INSERT INTO {schema}.flow_default_windows AS w (tenant, queue, window_start, window_used, throttled)
    SELECT tenant, queue, '0001-01-01 00:00:00+00', 0, 1 FROM hit WHERE inh AND (SELECT ok FROM fits)
        AND (SELECT count(*) FROM thr) >= 0
    ON CONFLICT (queue, tenant) DO UPDATE SET window_start = excluded.window_start, window_used = 0,
        throttled = w.throttled + 1
)`

// concLimitsOf is the SQL of the concurrency limits in queue $1's scope of
// the tenant of row alias a: its own, and the defaults of tenant '*' for
// the queue scopes it has no limit of its own for; inh marks a default's,
// rated a limit row with a rate too.
func concLimitsOf(a string) string {
	return `SELECT o.queue, o.concurrency, false AS inh, o.rate > 0 AS rated FROM {schema}.flow_controls o
        WHERE o.tenant = ` + a + `.tenant AND (o.queue = '' OR o.queue = $1) AND o.concurrency > 0
        UNION ALL
        SELECT d.queue, d.concurrency, true, d.rate > 0 FROM {schema}.flow_controls d
        WHERE d.tenant = '*' AND (d.queue = '' OR d.queue = $1) AND d.concurrency > 0
            AND NOT EXISTS (SELECT 1 FROM {schema}.flow_controls w WHERE w.tenant = ` + a + `.tenant AND w.queue = d.queue
                AND (w.rate > 0 OR w.concurrency > 0))
        OFFSET 0`
}

// claimReservedSQL builds the reserved claim statement of variant v.
func claimReservedSQL(v reservedVariant) string {
	concCTE, concOK, concMeta := "", "", strconv.Itoa(concRoom)
	spent := "$11::text[]"
	hits, hitDefaults := "0", "'{}'::text[]"
	// The bound's parameter follows the weights'; the claim's lease token
	// is the last parameter, after the bound's or where it would be.
	weights, floorN := "", 16
	if v.weighted {
		weights, floorN = weightArgs, 18
	}
	floor, tokenN := "$"+strconv.Itoa(floorN), floorN
	if v.conc != concNone {
		tokenN++
	}
	token := "$" + strconv.Itoa(tokenN)
	switch v.conc {
	case concBound:
		concCTE, concOK = strings.Replace(tenantBoundSQL, "{floor}", floor, 1), " AND (SELECT ok FROM cb)"
		concMeta = fmt.Sprintf("CASE WHEN (SELECT ok FROM cb) THEN %d ELSE %d END", concByBound, concNotBound)
	case concCounted:
		concCTE, concOK = strings.Replace(tenantConcSQL, "{floor}", floor, 1), " AND (SELECT ok FROM tconc)"
		concMeta = fmt.Sprintf("CASE WHEN (SELECT ok FROM cb) THEN %d WHEN (SELECT ok FROM tconc) THEN %d ELSE %d END",
			concByBound, concRoom, concAtLimit)
		spent = "($11::text[] || ARRAY(SELECT DISTINCT tenant FROM atl))"
		hits, hitDefaults = "(SELECT count(*) FROM hit)", "ARRAY(SELECT DISTINCT queue FROM hit WHERE inh)"
	}
	guard := `SELECT (SELECT current FROM cur) AS ok`
	if v.queueConc {
		guard = `SELECT (SELECT current FROM cur)
        AND NOT EXISTS (SELECT 1 FROM {schema}.flow_controls q
            WHERE q.tenant = '' AND (q.queue = '' OR q.queue = $1) AND q.concurrency > 0
              AND q.concurrency - ` + runningOf("q") + ` < $5) AS ok`
	}
	// Without defaults $14 and $15 are still named, so that their types
	// are known.
	known := `SELECT NOT $15::bool OR $14::text IS NULL AS ok`
	if v.known {
		known = `-- OFFSET 0 keeps the probe per visited tenant: as an anti-join the
    -- generic plan hashed every known tenant of the store on each claim.
    SELECT NOT ($15::bool AND EXISTS (SELECT 1 FROM want x WHERE x.n > 0 AND NOT EXISTS (SELECT 1 FROM {schema}.flow_known k
            WHERE k.holder = $14 AND k.queue = $1 AND k.tenant = x.tenant OFFSET 0))) AS ok`
	}
	throttle := ""
	if v.conc == concCounted {
		throttle = concThrottleSQL
	}
	return `WITH RECURSIVE cur AS (
    SELECT gen = $10 AS current FROM {schema}.flow_generation
), guard AS (
    ` + guard + `
), ` + claimOneBody(spent, "(SELECT ok FROM fits)", weights, token) + `, kn AS (
    ` + known + `
)` + concCTE + `, fits AS (
    SELECT (SELECT ok FROM guard) AND NOT EXISTS (SELECT 1 FROM want x
        JOIN unnest($12::text[], $13::int[]) AS c(tenant, n) ON c.tenant = x.tenant WHERE x.n > c.n)
        AND (SELECT ok FROM kn)` + concOK + ` AS ok
)` + throttle + `, meta AS (
    SELECT (SELECT ok FROM fits) AS ok, (SELECT coalesce(array_agg(tenant ORDER BY ord), '{}') FROM ten) AS visited,
        (SELECT current FROM cur) AS current, (SELECT ok FROM kn) AS known, ` + concMeta + ` AS conc_ok,
        ` + hits + ` AS hits, ` + hitDefaults + ` AS hit_defaults
)
SELECT m.*, u.* FROM meta m LEFT JOIN upd u ON true`
}

// qReservedSetup is the first statement of a reserved claim's
// transaction: JIT off and generic plans for the claim statement (its plan
// does not depend on its parameters, but PostgreSQL would plan it anew for
// each claim), no bitmap scans, the lock of claim token $4 (class $3,
// claim_token_lock.go), and the advisory locks (class $2) of the
// queue scopes $1 that hold concurrency limits, which every locking claim
// of the queue takes too (qConcLock), so that the claim statement that
// follows counts running jobs in a snapshot taken after every claim that
// started jobs under them committed. One statement instead of several
// saves their messages.
//
// The scopes come from the store's cached limits (queueBudget.lockScopes)
// rather than from flow_controls, which qConcLock reads on every claim:
// with a hundred tenants' concurrency limits that read and its sort cost
// a few points of claim throughput. They are the scopes qConcLock would
// lock whenever the cache is current, and the claim statement claims
// nothing when it is not (its generation check, in a snapshot taken after
// the locks).
//
// Bitmap scans are off for the running count (runningOf): it reads the
// partial index of running jobs, which keeps an entry for every job that
// ran since the last vacuum, and a bitmap scan visits each one's heap row
// on every claim (280 entries, 75 µs of a 0.8 ms statement, 100 tenants);
// an index scan marks the dead ones as such in the index, and the next
// claims skip them (20 µs). The statement's other scans read a few rows
// each by index, where a bitmap gains nothing.
var qReservedSetup = `SELECT set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true),
    set_config('enable_bitmapscan', 'off', true), ` + tokenLock("$3", "$4") + `, ` + concLocks(`SELECT unnest($1::text[])`)

// runningOf is the SQL count of the running jobs of flow row alias a's
// scope at the claim's now ($2), the cancelled ones still holding their
// partition included, and the retried ones until their old lease ends
// (sqlSlotTaken; jobs_running_scope_idx).
func runningOf(a string) string {
	return `(SELECT count(*) FROM {schema}.jobs r WHERE ` + sqlSlotTaken("$2::timestamptz") + `
            AND (` + a + `.tenant = '' OR r.tenant = ` + a + `.tenant) AND (` + a + `.queue = '' OR r.queue = ` + a + `.queue))`
}

// claimReserved is the reserved claim (see above) of p.Queues[0]. It
// reports applies false when the queue's limits are not the kind it
// handles, or a recent claim declined for tenants' concurrency limits
// (concSkip: a visited tenant without room, or a tenant at a limit with a
// rate); then nothing was done. Otherwise ok false means it declined
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
	many := len(qb.defaults) > 0 && len(qb.tenants) > maxInherited
	backOff := qb.concSkip > 0
	if backOff {
		qb.concSkip--
	}
	s.reserved.mu.Unlock()
	if backOff {
		return nil, false, false, false, nil
	}
	if many {
		// Met more tenants than maxInherited: read the limits again
		// (with as many windows the queue goes to the locking claims,
		// and is looked at again after a second).
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
	// The limits that are spent throttle the claim when they held work
	// back, as the general path's ClaimBudget.QueueOpen and Excluded find
	// them and HeldBack counts them (heldHits, reportHits).
	throttle := func(b *rateBudget) { hits = append(hits, b) }
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
		// Only tenants with a budget that holds less than the claim can
		// be spent, capped or throttled; the claim may spend up to
		// p.Limit of every other tenant's budgets, which it does not hold
		// one by one (inflight).
		var lowT []string
		for _, b := range qb.low(now, p.Limit) {
			if b.limit.Tenant != "" {
				lowT = append(lowT, b.limit.Tenant)
			}
		}
		slices.Sort(lowT)
		for _, t := range slices.Compact(lowT) {
			c := p.Limit
			group := qb.tenants[t]
			for _, b := range group {
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
				for _, b := range group {
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
		if !taken {
			qb.inflight = p.Limit
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
		if qb.inflight > 0 {
			// The budgets the claim did not hold: what it spent of
			// them, or when that is unknown all it could have.
			spend := func(b *rateBudget, n int) {
				if b.held == 0 && n > 0 {
					b.left -= min(b.left, n)
					qb.watch(b)
				}
			}
			if unknown {
				for _, b := range qb.list {
					spend(b, qb.inflight)
				}
			} else {
				for t, n := range got {
					for _, b := range qb.tenants[t] {
						spend(b, n)
					}
				}
			}
			qb.inflight = 0
		}
		for _, b := range held {
			used := got[b.limit.Tenant]
			if b.limit.Tenant == "" {
				used = len(out)
			}
			if !unknown {
				b.left += b.held - min(b.held, used)
			}
			b.held = 0
			qb.watch(b)
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
		// No claim statement runs: the due jobs of the queue are made
		// available with the probe (qHeldBack reads available jobs only).
		if hits, err = s.heldHits(ctx, p, now, hits, true); err != nil {
			return nil, true, false, false, err
		}
		reportHits(&report, hits)
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
	out, visited, conc, ok, current, known, sent, err := s.claimReservedStatement(ctx, p, now, qb, skip, capT, capN, dflt)
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
	if conc.any {
		report.Throttled = true // counted by the statement
	}
	if len(hits) > 0 {
		// The claim committed: its jobs are the caller's whatever happens
		// to the statistics.
		held, herr := s.heldHits(ctx, p, now, hits, false)
		if herr != nil {
			s.logger.Warn("pgstore: count throttled claims", "err", herr)
		}
		hits = held
		reportHits(&report, hits)
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
		later := &laterRounds{tenants: full, counted: countedDefaults(hits, conc.defaults)}
		jobs, err := s.claimLimited(ctx, &more, now, qb.shape, later)
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
	if qb.tconc {
		s.reservedConc.Add(1)
	}
	return out, true, true, false, nil
}

// claimReservedStatement runs the reserved claim statement, the variant
// for the queue's cached limits (under tenants' concurrency it sets
// qb.concSkip when it declined for them, concAtLimit); dflt says the
// queue has default limits (the claim visits only tenants the store wrote
// to flow_known). It returns the visited tenants, also when it declined, and
// known false when it declined for a tenant without a flow_known row. hit
// says whether the claim skipped tenants at a concurrency limit (the
// statement counted the throttled claim on their limits) and on which
// defaults it counted it. sent says the batch went out (an error after it
// leaves the outcome unknown).
//
// Under tenants' concurrency it first sends the statement that checks the
// bound alone (its plan is smaller: the count's joins with the limits
// cost about 70 µs of executor start-up on every claim even when the
// bound decides); when the bound fails, the counting statement runs at
// once, and the queue's next boundRetry claims send it first, unless the
// bound holds again sooner (qb.boundMiss). A claim declined for a stale
// generation or an unknown tenant is not retried (it declines anyway).
func (s *Store) claimReservedStatement(ctx context.Context, p *store.JobClaimParams, now time.Time, qb *queueBudget,
	skip, capT []string, capN []int32, dflt bool) (out []*idemtype.JobRow, visited []string, hit concHits, ok, current, known, sent bool, err error) {
	var (
		concOK int32
		hits   int64
	)
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
	cursor, solo := s.rotationStart(queue)
	args := []any{queue, now, cursor, kinds, limit, p.LeaseUntil, p.WorkerID, p.Tenant,
		solo, qb.gen, skip, capT, capN, s.holder, dflt}
	weighted := len(qb.weightT) > 0
	if weighted {
		args = append(args, qb.weightT, qb.weightN)
	}
	if qb.tconc {
		args = append(args, qb.concFloor)
	}
	args = append(args, p.LeaseToken)
	stmtOf := func(counted bool) string {
		v := reservedVariant{weighted: weighted, known: dflt, queueConc: qb.conc}
		switch {
		case qb.tconc && counted:
			v.conc = concCounted
		case qb.tconc:
			v.conc = concBound
		}
		return qClaimReservedVariants[v]
	}
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, nil, concHits{}, false, false, false, false, err
	}
	defer conn.Release()
	counted, retried := qb.boundMiss > 0, false
	for {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(s.sql(qReservedSetup), qb.lockScopes, s.flowLockClass(), s.claimLockClass(), p.LeaseToken)
		s.queuePromote(b, p.Queues, now)
		b.Queue(s.sql(stmtOf(counted)), args...)
		b.Queue("COMMIT")
		sent = true
		err = func() error {
			br := conn.SendBatch(ctx, b)
			defer br.Close()
			if err := execPromoteFirst(ctx, br, 3, 2); err != nil {
				return err
			}
			if out, err = readClaimRows(br, &ok, &visited, &current, &known, &concOK, &hits, &hit.defaults); err != nil {
				return err
			}
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			promotedCommitted(ctx)
			return br.Close()
		}()
		if err != nil {
			return nil, nil, concHits{}, false, false, false, true, err
		}
		if !qb.tconc {
			break
		}
		switch {
		case concOK == concNotBound && !counted && current && known:
			// Nothing was claimed or written: count now.
			qb.boundMiss, counted, retried = boundRetry, true, true
			continue
		case concOK == concByBound:
			qb.boundMiss = 0
		case counted && !retried && qb.boundMiss > 0:
			qb.boundMiss--
		}
		break
	}
	if !ok {
		if concOK == concAtLimit {
			// A visited tenant without room for its want, or a tenant at
			// a limit with a rate: the locking claims, which cap, count
			// and throttle, take the next claims.
			s.reserved.mu.Lock()
			qb.concSkip = concBackoff
			s.reserved.mu.Unlock()
		}
		return nil, visited, concHits{}, false, current, known, true, nil
	}
	if concOK == concByBound {
		s.reservedConcBound.Add(1)
	}
	// The statement counted the claim as throttled on the concurrency
	// limits of the tenants it skipped for being at them.
	if hits > 0 {
		s.reservedConcSkipped.Add(1)
	}
	hit.any = hits > 0
	return out, visited, hit, true, true, known, true, nil
}

// countedDefaults returns the queue scopes of the default limits a
// reserved claim's first round counted the claim on: those of the
// tenants' copies among the spent rate budgets hits (countThrottled) and
// the statement's (concHits.defaults).
func countedDefaults(hits []*rateBudget, conc []string) []string {
	out := slices.Clone(conc)
	for _, b := range hits {
		if b.inherited {
			out = append(out, b.limit.Queue)
		}
	}
	return out
}

// concHits is what the reserved claim statement counted as throttled on
// tenants' concurrency limits.
type concHits struct {
	any      bool     // it skipped tenants at a concurrency limit
	defaults []string // the queue scopes of the defaults (tenant '*') it counted the claim on
}

// boundRetry is how many claims of a queue send the counting statement
// first after the bound failed (unless the bound holds again sooner).
const boundRetry = 16

// concBackoff is how many claims of a queue go to the locking claims after
// a reserved claim declined for tenants' concurrency limits (concAtLimit:
// while that lasts, every reserved claim would decline).
const concBackoff = 8
