package sqlitestore

import (
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
}

// invalidate drops the rows: the next claim reads the table again.
func (c *flowCache) invalidate() {
	c.valid, c.rows, c.index = false, nil, nil
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
			continue // flow_default_windows: not cached
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
