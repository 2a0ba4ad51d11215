package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// The general limited claim, for what the one-round claim
// (claim_limited_fast.go) declines or does not handle (several queues,
// weights, pauses, a limit that could bind): a transaction of three round
// trips in the common case,
//
//  1. [BEGIN, JIT off and the advisory locks of the queue scopes with
//     concurrency limits (qLockedSetup), lock the limit rows (qFlowLock), read
//     the weights, count the running jobs the claim can be limited by
//     (qRunningOfClaim), read the default windows, list the tenants to
//     visit (qClaimRotation)]
//  2. the claim (qClaimFair)
//  3. [write the usage back (qFlowUsage, qDefaultUsage), COMMIT]
//
// instead of eight or nine sequential statements (flow read, BEGIN, lock,
// running count, windows, probes, claim, usage, COMMIT). The statements of
// one batch run one after the other, each with its own snapshot (READ
// COMMITTED), so the running count and the windows are still read after
// the lock: exactly as exact as before.
//
// The tenant listing of a claim of one queue (all tenants) goes into the
// first batch, before the budget says which tenants are spent: it excludes
// the tenants the previous claim of the queue found spent (excludedHints).
// When the budget excludes exactly those, the list is the one the claim
// would have made; when it excludes more, the extra tenants are dropped
// from the list, which is still exact unless the list was full (then more
// tenants may follow: it is listed again); when a tenant the hint excluded
// is no longer spent, it is listed again. So the visit order is always the
// one of store.ClaimTenants; only the round trips change.
//
// The flow read that decided whether to take this path is cached per set
// of queues (flowShapes): a claim whose last claim of the same queues found
// limits comes here directly, and the lock read itself says what is true
// now. The cache also says whether the batch must count running jobs and
// read default windows; when the lock read finds a concurrency limit or a
// default the cache did not announce, the claim reads them in one more
// round trip (still after the lock).

// flowShape is what a locked claim of a set of queues found.
type flowShape struct {
	limited     bool // some limit (rate or concurrency) applies
	concurrency bool // some limit counts running jobs
	defaults    bool // some limit is a default (tenant '*')
}

// flowShapes caches flowShape per set of queues; safe for concurrent use.
type flowShapes struct {
	mu sync.Mutex
	m  map[string]flowShape
}

func queuesKey(queues []string) string { return strings.Join(queues, "\x00") }

func (f *flowShapes) get(queues []string) flowShape {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[queuesKey(queues)]
}

func (f *flowShapes) set(queues []string, sh flowShape) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]flowShape{}
	}
	if sh.limited {
		f.m[queuesKey(queues)] = sh
	} else {
		delete(f.m, queuesKey(queues))
	}
}

// shapeOf returns the shape of limits.
func shapeOf(limits []*store.Limit) flowShape {
	sh := flowShape{limited: len(limits) > 0, concurrency: store.HasConcurrency(limits)}
	for _, l := range limits {
		sh.defaults = sh.defaults || l.IsDefault()
	}
	return sh
}

// qFlowWeights reads the weights of the tenants in the claimed queues.
const qFlowWeights = `SELECT tenant, queue, rate, period_us, concurrency, weight, paused, window_start, window_used, throttled, def_ver
FROM {schema}.flow_controls WHERE (queue = '' OR queue = ANY($1::text[])) AND weight > 0`

// laterRounds are the rounds after the first of a claim of one queue
// whose first round a statement of its own took (claimOneLimited,
// claimReserved), for claimLimited.
type laterRounds struct {
	// tenants are the tenants that got all of their first-round share:
	// the claim visits exactly these, as the rounds after the first of
	// store.ClaimRounds do, without listing or excluding tenants or moving
	// the cursor.
	tenants []string
	// counted are the queue scopes of the default limits (tenant '*') on
	// which the first round counted the claim as throttled: a claim
	// counts one throttled claim on a default however many of its rounds
	// and tenants' copies held it back (store.ClaimBudget.Usage), so the
	// later rounds do not count it again.
	counted []string
}

// claimLimited is JobClaim of queues with limits: see the comment above.
// later, when not nil, makes it the later rounds of a claim whose first
// round another statement took (see laterRounds).
func (s *Store) claimLimited(ctx context.Context, p *store.JobClaimParams, now time.Time, sh flowShape, later *laterRounds) ([]*idemtype.JobRow, error) {
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.sql(qLockedSetup), p.Queues, s.flowLockClass(), s.claimLockClass(), p.LeaseToken)
	s.queuePromote(b, p.Queues, now)
	b.Queue(s.sql(qFlowLock), p.Queues)
	b.Queue(s.sql(qFlowWeights), p.Queues)
	if sh.concurrency {
		b.Queue(s.sql(qRunningOfClaim), p.Queues, now)
	}
	if sh.defaults {
		b.Queue(s.sql(qDefaultWindows), now, p.Queues)
	}
	var pre *rotation
	if later != nil {
		pre = &rotation{queue: p.Queues[0], limit: p.Limit, fixed: true, tenants: later.tenants}
	} else if len(p.Queues) == 1 && p.Tenant == "" {
		var kinds []string
		if p.Kinds != nil {
			kinds = p.Kinds
		}
		queue := p.Queues[0]
		pre = &rotation{queue: queue, limit: p.Limit, excluded: s.excluded.get(queue)}
		b.Queue(s.sql(qClaimRotation), queue, now, s.cursors.Get(queue), kinds, append([]string{}, pre.excluded...), p.Limit)
	}
	br := conn.SendBatch(ctx, b)
	var (
		locked, weighted []flowRow
		running          []store.RunningCount
		windows          []store.InheritedWindow
	)
	err = func() error {
		defer br.Close()
		if err := execPromoteFirst(ctx, br, 3, 2); err != nil {
			return err
		}
		var err error
		if locked, err = scanFlow(br.Query()); err != nil {
			return err
		}
		if weighted, err = scanFlow(br.Query()); err != nil {
			return err
		}
		if sh.concurrency {
			if running, err = scanRunning(br.Query()); err != nil {
				return err
			}
		}
		if sh.defaults {
			if windows, err = scanWindows(br.Query()); err != nil {
				return err
			}
		}
		if pre != nil && !pre.fixed {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			if pre.tenants, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
		}
		return br.Close()
	}()
	if err != nil {
		return nil, err
	}
	limits, _, paused := splitFlow(locked)
	_, weights, _ := splitFlow(weighted)
	found := shapeOf(limits)
	s.shapes.set(p.Queues, found)
	if found.concurrency && !sh.concurrency {
		if running, err = s.loadRunning(ctx, conn, p.Queues, now); err != nil {
			return nil, err
		}
	}
	if found.defaults && !sh.defaults {
		if windows, err = s.loadWindows(ctx, conn, qDefaultWindows, now, p.Queues); err != nil {
			return nil, err
		}
	}
	if found.concurrency {
		store.SetRunning(limits, running)
	}
	absorbed, absorbedW := s.absorbReserved(limits, defVers(locked), windows, now)
	budget := store.NewClaimBudget(now, limits, paused)
	budget.SetWeights(weights)
	if budget.HasDefaults() {
		budget.SetInherited(windows, running)
	}
	out, err := s.claimFair(ctx, conn, p, budget, now, pre)
	if err != nil {
		return nil, err
	}
	if err := s.heldBack(ctx, conn, p, budget, now); err != nil {
		return nil, err
	}
	var own, inherited usageCols
	for _, u := range budget.Usage() {
		switch {
		case u.Inherited:
			inherited.add(u)
		case u.Scope.IsDefault() && later != nil && slices.Contains(later.counted, u.Scope.Queue):
			// The first round counted this claim on the default.
		default:
			own.add(u)
		}
	}
	// Limits whose reservation the claim took back are written even when
	// it spent nothing from them.
	for _, l := range absorbed {
		if !own.has(l.FlowScope) {
			own.add(store.LimitUsage{Scope: l.FlowScope, WindowStart: l.WindowStart, WindowUsed: l.WindowUsed})
		}
	}
	for _, w := range absorbedW {
		scope := store.FlowScope{Tenant: w.Tenant, Queue: w.Queue}
		if !inherited.has(scope) {
			inherited.add(store.LimitUsage{Scope: scope, WindowStart: w.WindowStart, WindowUsed: w.WindowUsed})
		}
	}
	b = &pgx.Batch{}
	for _, w := range []struct {
		q string
		c *usageCols
	}{{qFlowUsage, &own}, {qDefaultUsage, &inherited}} {
		if len(w.c.tenants) > 0 {
			b.Queue(s.sql(w.q), w.c.tenants, w.c.queues, w.c.starts, w.c.used, w.c.thr)
		}
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("write usage and commit: %w", err)
	}
	promotedCommitted(ctx)
	s.learnTenants(p.Queues, &inherited)
	budget.Report(p.Report)
	return out, nil
}

// scanFlow reads flow_controls rows.
func scanFlow(rows pgx.Rows, err error) ([]flowRow, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (flowRow, error) {
		var f flowRow
		var periodUS int64
		err := r.Scan(&f.limit.Tenant, &f.limit.Queue, &f.limit.Rate, &periodUS, &f.limit.Concurrency, &f.limit.Weight,
			&f.paused, &f.limit.WindowStart, &f.limit.WindowUsed, &f.limit.Throttled, &f.defVer)
		f.limit.Period = time.Duration(periodUS) * time.Microsecond
		f.limit.WindowStart = f.limit.WindowStart.UTC()
		return f, err
	})
}

// scanRunning reads qRunningScopes or qRunningOfClaim.
func scanRunning(rows pgx.Rows, err error) ([]store.RunningCount, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.RunningCount, error) {
		var c store.RunningCount
		err := r.Scan(&c.Tenant, &c.Queue, &c.N)
		return c, err
	})
}

// scanWindows reads tenants' windows under default limits.
func scanWindows(rows pgx.Rows, err error) ([]store.InheritedWindow, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.InheritedWindow, error) {
		var w store.InheritedWindow
		err := r.Scan(&w.Tenant, &w.Queue, &w.WindowStart, &w.WindowUsed, &w.Throttled)
		w.WindowStart = w.WindowStart.UTC()
		return w, err
	})
}

// rotation is the tenant list of a claim of one queue made ahead of the
// budget, with the exclusions of the queue's previous claim.
type rotation struct {
	queue    string
	limit    int
	excluded []string
	tenants  []string
	fixed    bool // tenants is the visit list as is (laterRounds)
	// next is the rotation of another queue listed ahead of time
	// (promoteAndList lists every queue of a claim).
	next *rotation
}

// use returns the visit list for the claim's actual exclusions, or false
// when the queue must be listed again: a tenant excluded ahead of time is
// no longer spent, or tenants dropped from a full list may have had
// successors. A nil rotation is never used.
func (r *rotation) use(queue string, limit int, excluded []string) ([]string, bool) {
	for r != nil && r.queue != queue {
		r = r.next
	}
	if r == nil || r.limit != limit {
		return nil, false
	}
	for _, t := range r.excluded {
		if !containsStr(excluded, t) {
			return nil, false
		}
	}
	var out []string
	for _, t := range r.tenants {
		if !containsStr(excluded, t) {
			out = append(out, t)
		}
	}
	if len(out) < len(r.tenants) && len(r.tenants) == r.limit {
		return nil, false
	}
	return out, true
}

// excludedHints remembers, per queue, the tenants the last claim of the
// queue found spent (see rotation); safe for concurrent use.
type excludedHints struct {
	mu sync.Mutex
	m  map[string][]string
}

func (h *excludedHints) get(queue string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[queue]
}

func (h *excludedHints) set(queue string, excluded []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string][]string{}
	}
	if len(excluded) == 0 {
		delete(h.m, queue)
		return
	}
	h.m[queue] = append([]string(nil), excluded...)
}
