package sqlitestore

import (
	"cmp"
	"slices"

	"github.com/idem-dev/idem/store"
)

// qDataVersion changes whenever another connection (another Store on the
// same file, in this process or another) committed a change; the writer's
// own commits leave it as it is.
const qDataVersion = `PRAGMA data_version`

// flowCache keeps the flow_controls rows between claims, so that a claim
// does not read every limit row again: with a hundred limits that read was
// most of what limits cost a claim. It belongs to the writer's transaction
// state (wtx) and is only touched by the writer goroutine.
//
// The rows are exactly what the table holds as long as
//   - no other connection committed (PRAGMA data_version is unchanged:
//     another Store, another process, the sqlite3 shell);
//   - every write of this connection to flow_controls went through the
//     cache: LimitPut, LimitDelete, QueuePause and QueueResume drop it,
//     a claim applies the usage it writes back (put), and a caller's
//     transaction (WriteTx) or a migration, which may write anything,
//     drops it;
//   - nothing written was rolled back: every ROLLBACK of the writer, whole
//     or to a savepoint, drops it.
type flowCache struct {
	rows    []flowRow
	index   map[store.FlowScope]int // position of a scope in rows
	valid   bool
	version int64 // data_version when rows were read
	// copies is the array a claim copies its limits into (splitFlow),
	// reused by the next claim: the writer runs one claim at a time and
	// a claim's budget does not outlive it.
	copies []store.Limit
	// windows are the rows of flow_default_windows (tenants' windows under
	// default limits), winAt their positions, when winValid: read once,
	// then kept as claims write them back (put), under the same rules as
	// rows. A claim looks them up and walks them for the spent ones; it
	// neither copies nor sorts them all (with 100 tenants sorting them was
	// most of what a default limit cost a claim in Go).
	windows  []store.InheritedWindow
	winAt    map[store.FlowScope]int
	winValid bool
}

// invalidate drops the rows: the next claim reads the table again.
func (c *flowCache) invalidate() {
	c.valid, c.rows, c.index = false, nil, nil
	c.winValid, c.windows, c.winAt = false, nil, nil
}

// inheritedWindows returns, for a claim at now (µs), the tenants' current
// windows under the rate limits of tenant '*' (those qDefaultWindows
// reads) as a lookup, and those of them that have used their default's
// rate, in tenant and queue order (store.ClaimBudget.SetInheritedLookup).
// load must have run in this transaction (it checks that no other
// connection committed). The lookup is valid until the cache changes
// (put), i.e. for the claim.
func (c *flowCache) inheritedWindows(t *wtx, now int64) (store.WindowLookup, []store.InheritedWindow, error) {
	if !c.valid {
		ws, err := loadWindows(t.query, qDefaultWindows, now)
		if err != nil {
			return nil, nil, err
		}
		return store.LookupWindows(ws), ws, nil
	}
	if !c.winValid {
		ws, err := loadWindows(t.query, qAllDefaultWindows, nil)
		if err != nil {
			return nil, nil, err
		}
		c.windows, c.winAt = ws, make(map[store.FlowScope]int, len(ws))
		for i, w := range ws {
			c.winAt[store.FlowScope{Tenant: w.Tenant, Queue: w.Queue}] = i
		}
		c.winValid = true
	}
	// The default rates by queue scope (one per queue scope with a
	// default rate; few).
	type rate struct {
		queue    string
		rate     int
		periodUS int64
	}
	var rates []rate
	for _, r := range c.rows {
		if l := r.limit; l.IsDefault() && l.Rate > 0 {
			rates = append(rates, rate{l.Queue, l.Rate, l.Period.Microseconds()})
		}
	}
	rateOf := func(queue string) (rate, bool) {
		for _, r := range rates {
			if r.queue == queue {
				return r, true
			}
		}
		return rate{}, false
	}
	// current is qDefaultWindows' test: the window started less than a
	// period ago.
	current := func(w *store.InheritedWindow) (rate, bool) {
		r, ok := rateOf(w.Queue)
		return r, ok && toUS(w.WindowStart) > now-r.periodUS
	}
	var spent []store.InheritedWindow
	for i := range c.windows {
		if r, ok := current(&c.windows[i]); ok && c.windows[i].WindowUsed >= r.rate {
			spent = append(spent, c.windows[i])
		}
	}
	slices.SortFunc(spent, compareWindows)
	return func(scope store.FlowScope) (store.InheritedWindow, bool) {
		i, ok := c.winAt[scope]
		if !ok {
			return store.InheritedWindow{}, false
		}
		if _, ok := current(&c.windows[i]); !ok {
			return store.InheritedWindow{}, false
		}
		return c.windows[i], true
	}, spent, nil
}

// load returns the flow-control rows, from the cache when no other
// connection committed since they were read. The caller must not modify
// them.
func (c *flowCache) load(t *wtx) ([]flowRow, error) {
	var version int64
	if err := t.queryRow(qDataVersion).Scan(&version); err != nil {
		return nil, err
	}
	if c.valid && c.version == version {
		return c.rows, nil
	}
	c.invalidate()
	rows, err := loadFlow(t.query)
	if err != nil {
		return nil, err
	}
	c.rows, c.version, c.valid = rows, version, true
	c.index = make(map[store.FlowScope]int, len(rows))
	for i, r := range rows {
		c.index[r.limit.FlowScope] = i
	}
	return rows, nil
}

// put applies the usage a claim wrote to flow_controls (qFlowUsage) to the
// cached rows, as a new read of the table would return it.
func (c *flowCache) put(us []store.LimitUsage) {
	if !c.valid {
		return
	}
	for _, u := range us {
		if u.Inherited {
			if c.winValid {
				c.putWindow(u)
			}
			continue
		}
		i, ok := c.index[u.Scope]
		if !ok {
			c.invalidate()
			return
		}
		l := &c.rows[i].limit
		l.WindowStart, l.WindowUsed = fromUS(toUS(u.WindowStart)), u.WindowUsed
		l.Throttled += u.Throttled
	}
}

// putWindow applies a tenant's usage under a default to the cached
// windows, as qDefaultUsage's upsert writes it.
func (c *flowCache) putWindow(u store.LimitUsage) {
	i, ok := c.winAt[u.Scope]
	if !ok {
		i = len(c.windows)
		c.windows = append(c.windows, store.InheritedWindow{Tenant: u.Scope.Tenant, Queue: u.Scope.Queue})
		c.winAt[u.Scope] = i
	}
	w := &c.windows[i]
	w.WindowStart, w.WindowUsed = fromUS(toUS(u.WindowStart)), u.WindowUsed
	w.Throttled += u.Throttled
}

// compareWindows orders windows by tenant and queue (inheritedWindows'
// spent ones).
func compareWindows(a, b store.InheritedWindow) int {
	return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Queue, b.Queue))
}
