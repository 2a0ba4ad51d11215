package pgstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// What a store holds of the reserved rate budget (claim_reserved.go): per
// queue, the limits it read and the budget it reserved of each, the tenants
// it met under default limits (written to flow_known), and the flow
// generation they were read under.

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
	left   int         // reserved, not spent, not held (a claim in flight may spend up to its size of it, inflight)
	held   int         // taken out of left by the claim in flight
	empty  bool        // the last reservation found window ws with nothing left
	// watched: the budget is one of its queue budget's candidates (cand).
	watched bool
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
	list     []*rateBudget            // queue and then every tenant's
	loaded   time.Time                // when read (an ineligible queue is read again)
	// defaults are the default rate limits (tenant "*") of the queue's
	// scope, as rate budgets that hold nothing; own the scopes of tenants'
	// own limits (rate or concurrency). Every tenant without its own limit
	// for a default's queue scope inherits it: with defaults, a visited
	// tenant without a flow_known row of the store (one it has not met)
	// makes the claim decline, and the store adds the tenant's inherited
	// budgets (inherit).
	defaults []*rateBudget
	own      map[store.FlowScope]bool
	seen     map[string]bool // tenants inherit has been called for
	// unsynced are tenants seen (with defaults) not yet written to
	// flow_known (migration 0020); fresh: the store's rows of the queue
	// there are from an earlier read and must go first.
	unsynced []string
	fresh    bool
	// tconc: the queue's scope holds a tenant's concurrency limit (its own
	// or a default's; reservedVariant.conc); concSkip counts the claims
	// still to leave to the locking claims after one declined for them
	// (concAtLimit).
	tconc    bool
	concSkip int
	// concFloor is the least of those tenants' concurrency limits
	// (the reserved claim's bound); boundMiss counts the claims still to
	// send the counting statement first (claimReservedStatement; claimMu
	// guards it).
	concFloor int64
	boundMiss int
	// lockScopes are the queue scopes ("" and the queue) that hold any
	// concurrency limit, whose advisory locks a claim takes
	// (qReservedSetup; the locking claims' qConcLock takes the same).
	lockScopes []string
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
	// cand are the budgets a claim walks instead of every budget (list):
	// every budget that may hold less than lowMark now is among them. A
	// budget leaves them when a claim finds it holding at least lowMark;
	// it comes back when what it holds drops (watch), when a window of a
	// budget that left ends (nextRoll: then every budget is looked at
	// again, and lowMark is the claim's size), when a claim is larger
	// than lowMark, or when a claim's now is earlier than one before. With thousands of
	// tenants under a default, walking every budget on every claim was
	// most of a claim's cost.
	cand     []*rateBudget
	lowMark  int
	nextRoll time.Time
	latest   time.Time // the latest now a claim walked the candidates at
	// inflight is the size of the reserved claim in flight (0: none): it
	// may spend up to that much of any tenant's budget it did not hold
	// (held), so absorbReserved leaves that much of those.
	inflight int
	// claimMu serialises the store's reserved claims of the queue (they
	// come from one producer, so it rarely waits); a claim that took it on
	// a budget replaced meanwhile declines.
	claimMu sync.Mutex
}

// learnTenants gives the store's budgets of queues with default limits
// the tenants whose rate windows under a default a locking claim of this
// store wrote (w; a window with no start is a concurrency-only default's,
// which no budget holds): a window the reserved claims do not know of would not
// count their throttled claims when spent, as the general path does. The
// next reserved claim writes them to flow_known and reserves their
// windows. (Windows other processes write are met when a claim visits
// their tenants.)
func (s *Store) learnTenants(queues []string, w *usageCols) {
	if len(w.tenants) == 0 {
		return
	}
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	for _, q := range queues {
		qb := s.reserved.queues[q]
		if qb == nil || len(qb.defaults) == 0 {
			continue
		}
		for i, t := range w.tenants {
			if !w.starts[i].IsZero() {
				qb.inherit(t)
			}
		}
	}
}

// maxInherited is the most tenants a queue with default limits may hold
// budgets for (kept in memory; every window's first claim walks them): a
// queue with more takes the locking claims.
const maxInherited = 20000

// inherit adds tenant's inherited budgets (those of every default whose
// queue scope the tenant has no limit of its own for), once per tenant
// (seen). s.reserved.mu must be held, or qb not yet shared.
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
		qb.watch(b)
	}
}

// ineligibleFor is how long a queue whose limits the reserved claim does
// not handle goes to the locking claims before its limits are read again.
const ineligibleFor = time.Second

// eachBudget calls f with every rate budget the store holds, of current
// and of dropped queue budgets, with its queue budget; s.reserved.mu must
// be held. f returns false to stop.
func (s *Store) eachBudget(f func(qb *queueBudget, b *rateBudget) bool) {
	for _, m := range []map[string]*queueBudget{s.reserved.queues, s.reserved.old} {
		for _, qb := range m {
			for _, b := range qb.list {
				if !f(qb, b) {
					return
				}
			}
		}
	}
}

// watch makes b one of qb's candidates (it may hold less than lowMark).
func (qb *queueBudget) watch(b *rateBudget) {
	if !b.watched {
		b.watched = true
		qb.cand = append(qb.cand, b)
	}
}

// low returns qb's budgets that hold less than claim at now (allowance),
// in the order they became candidates, and drops the candidates that
// hold at least lowMark. s.reserved.mu must be held.
func (qb *queueBudget) low(now time.Time, claim int) []*rateBudget {
	// A claim with an earlier now than one before it (claims take their
	// now before they queue for claimMu) looks at every budget: one that
	// left the candidates may have a window after its now, which holds
	// nothing for it.
	if claim > qb.lowMark || !now.Before(qb.nextRoll) || now.Before(qb.latest) {
		qb.lowMark = claim
		qb.nextRoll = now.Add(24 * time.Hour)
		for _, b := range qb.list {
			qb.watch(b)
		}
	}
	if now.After(qb.latest) {
		qb.latest = now
	}
	var out []*rateBudget
	keep := qb.cand[:0]
	for _, b := range qb.cand {
		left := b.allowance(now)
		if left >= qb.lowMark {
			b.watched = false
			if end := b.ws.Add(b.limit.Period); end.Before(qb.nextRoll) {
				qb.nextRoll = end
			}
			continue
		}
		keep = append(keep, b)
		if left < claim {
			out = append(out, b)
		}
	}
	clear(qb.cand[len(keep):])
	qb.cand = keep
	return out
}

// givable is what absorbReserved may take back of b: all it holds, but
// for the claim in flight's share of a budget it did not hold.
func (qb *queueBudget) givable(b *rateBudget) int {
	if b.held > 0 || qb.inflight == 0 {
		return b.left
	}
	return max(0, b.left-qb.inflight)
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
	// again after a while: they may have changed. The while is measured on
	// the claim's clock (now), not the wall clock, so that a claim's path
	// depends on its inputs only (a clock that went back reads them again).
	if qb != nil {
		if since := now.Sub(qb.loaded); qb.eligible || (since >= 0 && since < ineligibleFor) {
			return qb, nil
		}
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
	qb = &queueBudget{gen: gen, shape: shapeOf(limits), eligible: len(limits) > 0, tenants: map[string][]*rateBudget{}, lockScopes: []string{},
		loaded: now, own: map[store.FlowScope]bool{}, seen: map[string]bool{}, fresh: true}
	for _, r := range rows {
		l := r.limit
		if r.paused && l.Queue == queue {
			if l.Tenant == "" {
				qb.closed = true
			} else {
				qb.paused = append(qb.paused, l.Tenant)
			}
		}
		if l.Concurrency > 0 && !slices.Contains(qb.lockScopes, l.Queue) {
			qb.lockScopes = append(qb.lockScopes, l.Queue)
		}
		if l.Weight > 0 {
			w := l
			qb.weights = append(qb.weights, &w)
		}
		if l.Tenant != "" && l.Concurrency > 0 {
			if !qb.tconc || int64(l.Concurrency) < qb.concFloor {
				qb.concFloor = int64(l.Concurrency)
			}
			qb.tconc = true
		}
		if l.Tenant != "" && !l.IsDefault() && l.Limited() {
			// A limit of its own: the tenant inherits no default of
			// this queue scope (store.ClaimBudget.ownLimit).
			qb.own[l.FlowScope] = true
		}
		switch {
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
		}
	}
	names := slices.Sorted(maps.Keys(qb.tenants))
	qb.list = slices.Clone(qb.queue)
	for _, t := range names {
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
		if len(windows)+len(names) > maxInherited {
			qb.eligible = false // too many tenants: the locking claims
		} else {
			for _, t := range names {
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
	if len(qb.defaults) > 0 && len(qb.tenants) > maxInherited {
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

// flow_known (migration 0020): qKnownClose forgets holder $1's tenants
// (Close), qKnownStale day-old rows (Open, and the leader's retention run:
// JobDeleteFinished), qKnownReset the tenants holder
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
	// A tenant can be queued twice (a claim that declined for it while a
	// locking claim's learnTenants had queued it): one row each.
	slices.Sort(add)
	add = slices.Compact(add)
	if len(add) == 0 && !fresh {
		return nil
	}
	s.knownWritten.Store(true)
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

// ownReserved returns what the store holds unspent of window ws of the
// limit of scope (of a tenant's window under the default of that queue
// scope when inherited); LimitList shows it as not used.
func (s *Store) ownReserved(scope store.FlowScope, inherited bool, ws time.Time) int {
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	n := 0
	s.eachBudget(func(_ *queueBudget, b *rateBudget) bool {
		if b.limit.FlowScope == scope && b.inherited == inherited && b.ws.Equal(ws) {
			n += b.left
		}
		return true
	})
	return n
}

// holdsReserved reports whether the store holds reserved budget of any
// limit (the locking one-round claim, which reads the windows in SQL, would
// not see it as the store's own).
func (s *Store) holdsReserved() bool {
	s.reserved.mu.Lock()
	defer s.reserved.mu.Unlock()
	holds := false
	s.eachBudget(func(_ *queueBudget, b *rateBudget) bool {
		holds = b.left > 0 || b.held > 0
		return !holds
	})
	return holds
}
