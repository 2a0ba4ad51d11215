package pgstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// The reserved claim's database side (claim_reserved.go): reserving
// budget of limits' own windows and of tenants' windows under defaults,
// counting throttled claims, giving budget back at Close, and handing a
// store's reservations to its locking claims (absorbReserved).

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

// windowStart is the SQL start of now's rate window of flow row alias a
// (NULL without a rate): fixed windows of the period since the epoch, as
// store.Limit.WindowAt; now is n.us, microseconds since the epoch.
func windowStart(a string) string {
	return `CASE WHEN ` + a + `.rate > 0 THEN 'epoch'::timestamptz + (n.us - ((n.us % ` + a + `.period_us) + ` + a + `.period_us) % ` +
		a + `.period_us) * interval '1 microsecond' END`
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
	for _, b := range qb.low(now, claim) {
		// A limit whose window had nothing more to give is not asked
		// again in that window (under a binding default that would lock
		// the default's row on every claim). Budget another store gives
		// back (Close) comes with a new flow generation, which makes the
		// store read its limits again (new budgets ask again); budget
		// this store's locking claim took back (absorbReserved) is asked
		// again too.
		if b.empty && b.ws.Equal(b.limit.WindowAt(now)) {
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
	byScope := [2]map[store.FlowScope]grant{make(map[store.FlowScope]grant, len(grants)), make(map[store.FlowScope]grant, len(inherited))}
	for i, gs := range [][]grant{grants, inherited} {
		for _, g := range gs {
			byScope[i][g.scope] = g
		}
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
		i := 0
		if b.inherited {
			i = 1
		}
		if g, ok := byScope[i][b.limit.FlowScope]; ok && g.ws.Equal(ws) {
			b.left += g.n
			b.empty = g.n == 0
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

// countThrottled counts one throttled claim on each of the limits: on
// their rows (qFlowThrottled), and for inherited limits on the tenants'
// windows, after locking the default rows (lockDefaults, qDefaultThrottled)
// as every writer of those windows does.
func (s *Store) countThrottled(ctx context.Context, hits []*rateBudget) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	var own, inh cols
	defs := map[string]bool{}
	for _, b := range hits {
		if b.inherited {
			inh.add(b, 0)
			defs[b.limit.Queue] = true
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
			if _, err := s.lockDefaults(ctx, tx, slices.Collect(maps.Keys(defs))); err != nil {
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

// lockDefaults locks the default rows (tenant "*") of queue scopes queues
// in tx, in one order, as the locking claims lock them, and returns their
// def_vers by queue scope.
func (s *Store) lockDefaults(ctx context.Context, tx pgx.Tx, queues []string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, s.sql(qDefaultLock), queues)
	if err != nil {
		return nil, err
	}
	vers := map[string]int64{}
	var (
		queue string
		ver   int64
	)
	_, err = pgx.ForEachRow(rows, []any{&queue, &ver}, func() error {
		vers[queue] = ver
		return nil
	})
	return vers, err
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
	s.eachBudget(func(qb *queueBudget, b *rateBudget) bool {
		// A claim in flight may still spend its share of a budget it
		// did not hold: that stays with the store.
		if give := qb.givable(b); give > 0 {
			held[key{b.limit.FlowScope, b.inherited, b.ws.UTC(), b.defVer}] += give
			b.left -= give
			qb.watch(b)
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
		current, err := s.lockDefaults(ctx, tx, slices.Collect(maps.Keys(defs)))
		if err != nil {
			return err
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

// qDefaultLock locks the default rows of queue scopes $1, in one order,
// and returns their queue scopes and def_vers.
const qDefaultLock = `SELECT f.queue, f.def_ver FROM {schema}.flow_controls f
WHERE f.tenant = '*' AND f.queue = ANY($1::text[])
ORDER BY f.tenant, f.queue FOR UPDATE OF f`

// absorbReserved takes back, for the general path, what the store holds of
// the current windows of limits (whose rows have the def_vers vers), and
// of the tenants' windows under the default limits among them: each such
// limit's WindowUsed (as read under the lock), and each such window's in
// windows, drops by it and the store holds nothing of it any more (but
// the share a reserved claim in flight may spend of a budget it did not
// hold, queueBudget.givable).
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
			s.eachBudget(func(qb *queueBudget, b *rateBudget) bool {
				if b.inherited && b.limit.Queue == l.Queue && b.left > 0 && b.ws.Equal(ws) {
					give := qb.givable(b)
					if b.defVer == vers[l.FlowScope] {
						took[b.limit.Tenant] += give
					}
					b.left, b.empty = b.left-give, false
					qb.watch(b)
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
		s.eachBudget(func(qb *queueBudget, b *rateBudget) bool {
			if !b.inherited && b.limit.FlowScope == l.FlowScope && b.left > 0 && b.ws.Equal(ws) {
				give := qb.givable(b)
				if l.WindowStart.Equal(ws) && b.defVer == vers[l.FlowScope] {
					n += give
				}
				b.left, b.empty = b.left-give, false
				qb.watch(b)
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
