package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Flow control: the flow_controls table (limits, pauses, rate windows).
const (
	qFlowAll = `SELECT tenant, queue, rate, period_us, concurrency, weight, paused, window_start_us, window_used, throttled
FROM flow_controls ORDER BY tenant, queue`
	qLimitPut = `INSERT INTO flow_controls (tenant, queue, rate, period_us, concurrency, weight)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (tenant, queue) DO UPDATE SET rate = ?3, period_us = ?4, concurrency = ?5, weight = ?6,
    window_start_us = CASE WHEN rate = ?3 AND period_us = ?4 THEN window_start_us ELSE 0 END,
    window_used = CASE WHEN rate = ?3 AND period_us = ?4 THEN window_used ELSE 0 END`
	qLimitClear = `UPDATE flow_controls SET rate = 0, period_us = 0, concurrency = 0, weight = 0, window_start_us = 0, window_used = 0
WHERE tenant = ?1 AND queue = ?2 AND (rate > 0 OR concurrency > 0 OR weight > 0)`
	qFlowPrune = `DELETE FROM flow_controls WHERE tenant = ?1 AND queue = ?2 AND rate = 0 AND concurrency = 0 AND weight = 0 AND NOT paused`
	qPause     = `INSERT INTO flow_controls (tenant, queue, paused) VALUES (?1, ?2, 1)
ON CONFLICT (tenant, queue) DO UPDATE SET paused = 1`
	qResume = `UPDATE flow_controls SET paused = 0 WHERE tenant = ?1 AND queue = ?2`
	// qFlowUsage writes back every limit a claim spent from or was
	// throttled by, in one statement: %s is a list of usageRowsMax rows
	// at most, (tenant, queue, window_start_us, window_used, throttled_add).
	qFlowUsage = `WITH u(tenant, queue, ws, used, thr) AS (VALUES %s)
UPDATE flow_controls SET window_start_us = u.ws, window_used = u.used, throttled = throttled + u.thr
FROM u WHERE flow_controls.tenant = u.tenant AND flow_controls.queue = u.queue`

	// qDefaultWindows reads the tenants' current windows under the rate
	// limits of tenant '*' (?1 now); older windows count nothing.
	qDefaultWindows = `SELECT w.tenant, w.queue, w.window_start_us, w.window_used, w.throttled
FROM flow_default_windows w JOIN flow_controls f ON f.tenant = '*' AND f.queue = w.queue
WHERE f.rate > 0 AND w.window_start_us > ?1 - f.period_us`
	// qAllDefaultWindows reads every tenant's windows under default limits
	// (the writer's flow cache keeps them).
	qAllDefaultWindows = `SELECT tenant, queue, window_start_us, window_used, throttled FROM flow_default_windows WHERE ?1 IS NULL`
	// qDefaultWindowsOf reads one tenant's windows under default limits.
	qDefaultWindowsOf = `SELECT tenant, queue, window_start_us, window_used, throttled FROM flow_default_windows WHERE tenant = ?1`
	// qDefaultUsage writes back the tenants' windows under default limits
	// a claim spent from or was throttled by: %s is a list of rows as in
	// qFlowUsage.
	qDefaultUsage = `INSERT INTO flow_default_windows (tenant, queue, window_start_us, window_used, throttled) VALUES %s
ON CONFLICT (queue, tenant) DO UPDATE SET window_start_us = excluded.window_start_us,
    window_used = excluded.window_used, throttled = throttled + excluded.throttled`
	// qDefaultReset forgets the windows of the default limit of queue ?1
	// unless it keeps its rate ?2 and period ?3 (a changed rate starts a
	// new window, as for any limit).
	qDefaultReset = `DELETE FROM flow_default_windows WHERE queue = ?1 AND NOT EXISTS (
    SELECT 1 FROM flow_controls WHERE tenant = '*' AND queue = ?1 AND rate = ?2 AND period_us = ?3)`
)

// The counts of running jobs (sqlSlotTaken is a function of the now
// parameter).
var (
	// qRunningScopes counts the jobs that take a slot of concurrency
	// limits at ?1 (sqlSlotTaken: running, cancelled and still holding
	// their FIFO partition, or retried while holding it until the old
	// lease ends) per (tenant, queue), on jobs_running.
	qRunningScopes = `SELECT tenant, queue, count(*) FROM jobs WHERE ` + sqlSlotTaken("?1") + ` GROUP BY tenant, queue`
	// The running jobs (sqlSlotTaken) of one scope at ?3, on the partial
	// index jobs_running (tenant, queue, …): one tenant's in one queue,
	// one tenant's, one queue's (TestRuntimePlansUsePartialIndexes).
	qRunningTenantQueue = `SELECT count(*) FROM jobs WHERE ` + sqlSlotTaken("?3") + ` AND tenant = ?1 AND queue = ?2`
	qRunningTenant      = `SELECT count(*) FROM jobs WHERE ` + sqlSlotTaken("?3") + ` AND tenant = ?1`
	qRunningQueue       = `SELECT count(*) FROM jobs WHERE ` + sqlSlotTaken("?3") + ` AND queue = ?2`
)

// flowRow is one scanned flow_controls row.
type flowRow struct {
	limit  store.Limit
	paused bool
}

// rowsQuerier is what the writer transaction and the read pool share.
type rowsQuerier func(q string, args ...any) (*sql.Rows, error)

// loadFlow reads every flow-control row.
func loadFlow(query rowsQuerier) ([]flowRow, error) {
	rows, err := query(qFlowAll)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []flowRow
	for rows.Next() {
		var r flowRow
		var periodUS, wsUS int64
		if err := rows.Scan(&r.limit.Tenant, &r.limit.Queue, &r.limit.Rate, &periodUS, &r.limit.Concurrency, &r.limit.Weight,
			&r.paused, &wsUS, &r.limit.WindowUsed, &r.limit.Throttled); err != nil {
			return nil, err
		}
		r.limit.Period = time.Duration(periodUS) * time.Microsecond
		r.limit.WindowStart = fromUS(wsUS)
		out = append(out, r)
	}
	return out, rows.Err()
}

// loadRunning counts running jobs per (tenant, queue) at now (µs).
func loadRunning(query rowsQuerier, now int64) ([]store.RunningCount, error) {
	rows, err := query(qRunningScopes, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.RunningCount
	for rows.Next() {
		var c store.RunningCount
		if err := rows.Scan(&c.Tenant, &c.Queue, &c.N); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// loadWindows reads tenants' windows under default limits.
func loadWindows(query rowsQuerier, q string, arg any) ([]store.InheritedWindow, error) {
	rows, err := query(q, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.InheritedWindow
	for rows.Next() {
		var w store.InheritedWindow
		var wsUS int64
		if err := rows.Scan(&w.Tenant, &w.Queue, &wsUS, &w.WindowUsed, &w.Throttled); err != nil {
			return nil, err
		}
		w.WindowStart = fromUS(wsUS)
		out = append(out, w)
	}
	return out, rows.Err()
}

// splitFlow returns the limits and paused scopes that concern queues:
// copies of the rows' limits (the budget sets their running counts), made
// in the array of copies when it has room, and that array.
func splitFlow(rows []flowRow, queues []string, copies []store.Limit) (limits, weights []*store.Limit, paused []store.FlowScope, _ []store.Limit) {
	if cap(copies) < len(rows) {
		copies = make([]store.Limit, 0, len(rows))
	}
	copies = copies[:0]
	for _, r := range rows {
		if r.limit.Queue != "" && !contains(queues, r.limit.Queue) {
			continue
		}
		if r.paused {
			paused = append(paused, r.limit.FlowScope)
		}
		if !r.limit.Limited() && r.limit.Weight == 0 {
			continue
		}
		copies = append(copies, r.limit)
		l := &copies[len(copies)-1]
		if l.Limited() {
			limits = append(limits, l)
		}
		if l.Weight > 0 {
			weights = append(weights, l)
		}
	}
	return limits, weights, paused, copies
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// LimitPut implements store.FlowControl.
func (s *Store) LimitPut(ctx context.Context, p *store.LimitPutParams) (*store.Limit, error) {
	l := p.Limit
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("put limit: %w", err)
	}
	l.Period = l.Period.Truncate(time.Microsecond) // as kept, and as returned
	err := s.write(ctx, 1, func(t *wtx) error {
		t.flow.invalidate()
		if l.IsDefault() {
			if _, err := t.exec(qDefaultReset, l.Queue, l.Rate, l.Period.Microseconds()); err != nil {
				return err
			}
		}
		_, err := t.exec(qLimitPut, l.Tenant, l.Queue, l.Rate, l.Period.Microseconds(), l.Concurrency, l.Weight)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("put limit: %w", err)
	}
	return &store.Limit{FlowScope: l.FlowScope, Rate: l.Rate, Period: l.Period, Concurrency: l.Concurrency, Weight: l.Weight}, nil
}

// LimitList implements store.FlowControl.
func (s *Store) LimitList(ctx context.Context, p *store.LimitListParams) ([]*store.Limit, error) {
	var out []*store.Limit
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		q := func(q string, args ...any) (*sql.Rows, error) { return tx.QueryContext(ctx, q, args...) }
		rows, err := loadFlow(q)
		if err != nil {
			return err
		}
		now := store.OrNow(p.Now)
		running, err := loadRunning(q, toUS(now))
		if err != nil {
			return err
		}
		out = limitsWithUsage(rows, running, p.Tenant, now)
		if p.Tenant != "" && p.Tenant != store.EveryTenant {
			ws, err := loadWindows(q, qDefaultWindowsOf, p.Tenant)
			if err != nil {
				return err
			}
			all := make([]*store.Limit, 0, len(rows))
			for _, r := range rows {
				all = append(all, &r.limit)
			}
			out = append(out, store.DefaultUsage(all, p.Tenant, ws, running, now)...)
			store.SortLimits(out)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", s.readErr(err))
	}
	return out, nil
}

// limitsWithUsage keeps the limit rows of tenant ("" = all) and fills
// their usage.
func limitsWithUsage(rows []flowRow, running []store.RunningCount, tenant string, now time.Time) []*store.Limit {
	out := []*store.Limit{}
	for _, r := range rows {
		if (!r.limit.Limited() && r.limit.Weight == 0) || (tenant != "" && r.limit.Tenant != tenant) {
			continue
		}
		l := r.limit
		out = append(out, &l)
	}
	store.SetRunning(out, running)
	store.CurrentWindows(out, now)
	return out
}

// LimitDelete implements store.FlowControl.
func (s *Store) LimitDelete(ctx context.Context, p *store.LimitDeleteParams) error {
	if err := p.Scope.Validate(); err != nil {
		return fmt.Errorf("delete limit: %w", err)
	}
	err := s.write(ctx, 1, func(t *wtx) error {
		t.flow.invalidate()
		res, err := t.exec(qLimitClear, p.Scope.Tenant, p.Scope.Queue)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return idemtype.ErrNotFound
		}
		if p.Scope.IsDefault() {
			if _, err := t.exec(qDefaultReset, p.Scope.Queue, -1, -1); err != nil {
				return err
			}
		}
		_, err = t.exec(qFlowPrune, p.Scope.Tenant, p.Scope.Queue)
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
	err := s.write(ctx, 1, func(t *wtx) error {
		t.flow.invalidate()
		_, err := t.exec(qPause, p.Scope.Tenant, p.Scope.Queue)
		return err
	})
	if err != nil {
		return fmt.Errorf("pause queue: %w", err)
	}
	return nil
}

// QueueResume implements store.FlowControl.
func (s *Store) QueueResume(ctx context.Context, p *store.QueuePauseParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("resume queue: %w", err)
	}
	err := s.write(ctx, 1, func(t *wtx) error {
		t.flow.invalidate()
		if _, err := t.exec(qResume, p.Scope.Tenant, p.Scope.Queue); err != nil {
			return err
		}
		_, err := t.exec(qFlowPrune, p.Scope.Tenant, p.Scope.Queue)
		return err
	})
	if err != nil {
		return fmt.Errorf("resume queue: %w", err)
	}
	return nil
}

// QueuePauseList implements store.FlowControl.
func (s *Store) QueuePauseList(ctx context.Context) ([]store.FlowScope, error) {
	rows, err := loadFlow(func(q string, args ...any) (*sql.Rows, error) { return s.rdb.QueryContext(ctx, q, args...) })
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", s.readErr(err))
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

// claimFair claims up to p.Limit jobs inside the writer's transaction:
// flow control first (pauses, limits), then the tenants of each queue in
// rotation, each with its fair share.
func (s *Store) claimFair(t *wtx, p *store.JobClaimParams, now int64) ([]*idemtype.JobRow, error) {
	flow, err := t.flow.load(t)
	if err != nil {
		return nil, err
	}
	limits, weights, paused, copies := splitFlow(flow, p.Queues, t.flow.copies)
	t.flow.copies = copies
	running, err := setRunning(t, limits, now)
	if err != nil {
		return nil, err
	}
	b := store.NewClaimBudget(fromUS(now), limits, paused)
	b.SetWeights(weights)
	if b.HasDefaults() {
		window, spent, err := t.flow.inheritedWindows(t, now)
		if err != nil {
			return nil, err
		}
		b.SetInheritedLookup(window, spent, running)
	}
	var out []*idemtype.JobRow
	for _, queue := range p.Queues {
		if len(out) >= p.Limit || !b.QueueOpen(queue) {
			continue
		}
		jobs, err := s.claimQueue(t, p, b, queue, now, p.Limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	if err := heldBack(t, p, b, now); err != nil {
		return nil, err
	}
	usage := b.Usage()
	var rows, inherited []any
	for _, u := range usage {
		row := []any{u.Scope.Tenant, u.Scope.Queue, toUS(u.WindowStart), u.WindowUsed, u.Throttled}
		if u.Inherited {
			inherited = append(inherited, row...)
		} else {
			rows = append(rows, row...)
		}
	}
	if err := writeUsage(t, qFlowUsage, rows); err != nil {
		return nil, err
	}
	if err := writeUsage(t, qDefaultUsage, inherited); err != nil {
		return nil, err
	}
	t.flow.put(usage)
	b.Report(p.Report)
	return out, nil
}

// usageRowsMax is the most usage rows written by one statement.
const usageRowsMax = 32

// writeUsage runs q (qFlowUsage or qDefaultUsage) on args, five per usage
// row, usageRowsMax rows at a time. The rows are bound parameters of a
// VALUES list: cheaper than a JSON array that SQLite parses again for
// every field, and the statement texts stay few (one per row count).
func writeUsage(t *wtx, q string, args []any) error {
	for len(args) > 0 {
		n := min(len(args)/5, usageRowsMax)
		if _, err := t.exec(fmt.Sprintf(q, usageValues(n)), args[:5*n]...); err != nil {
			return err
		}
		args = args[5*n:]
	}
	return nil
}

// usageValues returns the VALUES list of n usage rows.
func usageValues(n int) string {
	return strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", n), ", ")
}

// runningScopesMax is the most concurrency limits whose running jobs a
// claim counts scope by scope.
const runningScopesMax = 16

// setRunning fills the Running of the concurrency limits. A few limits
// without a default among them are counted scope by scope on the index
// (running jobs of other scopes cost nothing) and running is nil; else
// every running job is counted by (tenant, queue) once, and running holds
// those counts (a default limit needs every tenant's).
func setRunning(t *wtx, limits []*store.Limit, now int64) (running []store.RunningCount, err error) {
	var scoped []*store.Limit
	for _, l := range limits {
		if l.IsDefault() && l.Concurrency > 0 {
			scoped = nil
			break
		}
		if l.Concurrency > 0 {
			scoped = append(scoped, l)
		}
	}
	if len(scoped) == 0 || len(scoped) > runningScopesMax {
		if !store.HasConcurrency(limits) {
			return nil, nil
		}
		if running, err = loadRunning(t.query, now); err != nil {
			return nil, err
		}
		store.SetRunning(limits, running)
		return running, nil
	}
	for _, l := range scoped {
		q := qRunningTenantQueue
		switch {
		case l.Queue == "":
			q = qRunningTenant
		case l.Tenant == "":
			q = qRunningQueue
		}
		if err := t.queryRow(q, l.Tenant, l.Queue, now).Scan(&l.Running); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// claimQueue claims up to limit jobs of one queue, tenant by tenant.
func (s *Store) claimQueue(t *wtx, p *store.JobClaimParams, b *store.ClaimBudget, queue string, now int64, limit int) ([]*idemtype.JobRow, error) {
	excluded := b.Excluded(queue, p.Tenant)
	var tenants []string
	if p.Tenant != "" {
		if !contains(excluded, p.Tenant) {
			tenants = []string{p.Tenant}
		}
	} else {
		var err error
		tenants, err = store.ClaimTenants(s.cursors.Get(queue), limit, func(after, upTo string, k int) ([]string, error) {
			return nextTenants(t, p.Kinds, queue, now, after, upTo, excluded, k)
		})
		if err != nil {
			return nil, err
		}
	}
	out, turns, err := store.ClaimRoundsTurns(b, queue, limit, tenants, func(ts []string, ns []int) ([]*idemtype.JobRow, error) {
		return claimTenants(t, p, queue, ts, ns, now)
	})
	if err != nil {
		return nil, err
	}
	// The cursor moves past the tenants whose turn the claim took, not
	// past one the budget left out (store.ClaimRoundsTurns).
	if p.Tenant == "" && len(turns) > 0 {
		s.cursors.Set(queue, turns[len(turns)-1])
	}
	return out, nil
}

// nextTenants is the skip scan of ClaimTenants: at most k tenants with
// claimable work in queue, after "after" and up to upTo, not excluded.
//
// k is not a LIMIT of the statement: SQLite plans with a bound LIMIT's
// value, so a LIMIT parameter expires the statement whenever k changes
// and every claim parsed and planned it again (two thirds of this scan's
// cost). The recursive CTE runs as a co-routine, one probe per row read,
// so reading k rows and closing stops the scan as the LIMIT did.
func nextTenants(t *wtx, kinds []string, queue string, now int64, after, upTo string, excluded []string, k int) ([]string, error) {
	if k <= 0 {
		return nil, nil
	}
	q, args, err := nextTenantsSQL(kinds, queue, now, after, upTo, excluded)
	if err != nil {
		return nil, err
	}
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for len(out) < k && rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// nextTenantsSQL is nextTenants' statement and its arguments.
func nextTenantsSQL(kinds []string, queue string, now int64, after, upTo string, excluded []string) (string, []any, error) {
	probe := `SELECT j.tenant FROM jobs j WHERE j.queue = ?1 AND ` + sqlAvailable("j") + ` AND j.run_at <= ?2 AND j.tenant > %s` +
		kindFilter(kinds, 6) + ` ORDER BY j.tenant LIMIT 1`
	q := `WITH RECURSIVE t(tenant) AS (
    SELECT (` + fmt.Sprintf(probe, "?3") + `)
    UNION ALL
    SELECT (` + fmt.Sprintf(probe, "t.tenant") + `) FROM t WHERE t.tenant IS NOT NULL AND (?4 = '' OR t.tenant < ?4)
)
SELECT tenant FROM t WHERE tenant IS NOT NULL AND (?4 = '' OR tenant <= ?4)
    AND tenant NOT IN (SELECT value FROM json_each(?5))`
	ex, err := json.Marshal(append([]string{}, excluded...))
	if err != nil {
		return "", nil, err
	}
	args := []any{queue, now, after, upTo, string(ex)}
	for _, kind := range kinds {
		args = append(args, kind)
	}
	return q, args, nil
}

// kindFilter is the kind condition of a claim, its values bound from
// ?first on.
func kindFilter(kinds []string, first int) string {
	if len(kinds) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(" AND j.kind IN (")
	for i := range kinds {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("?" + strconv.Itoa(first+i))
	}
	sb.WriteByte(')')
	return sb.String()
}

// claimTenants claims up to ns[i] jobs of tenants[i] in queue, in claim
// order, with one UPDATE: one ordered probe of jobs_claim_tenant per tenant.
func claimTenants(t *wtx, p *store.JobClaimParams, queue string, tenants []string, ns []int, now int64) ([]*idemtype.JobRow, error) {
	q, args := claimTenantsSQL(p, queue, tenants, ns, now)
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*idemtype.JobRow
	for rows.Next() {
		j, err := scanClaimed(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// claimTenantsSQL is claimTenants' statement and its arguments.
func claimTenantsSQL(p *store.JobClaimParams, queue string, tenants []string, ns []int, now int64) (string, []any) {
	// ?1 queue, ?2 now, ?3 lease, ?4 worker, ?5 the claim's lease token
	// ("": one random token per job), then the tenants, then the kinds. The limits are part of the text, not parameters: SQLite plans
	// with a bound LIMIT's value, so rebinding another limit would expire
	// the statement and recompile it on every claim. The texts stay few:
	// a claim's shares are all equal but the last.
	kinds := kindFilter(p.Kinds, 6+len(tenants))
	var sb strings.Builder
	sb.WriteString(`UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at = ?2,
    lease_token = coalesce(nullif(?5, ''), lower(hex(randomblob(16)))), lease_expires_at = ?3, worker_id = ?4
WHERE id IN (`)
	args := []any{queue, now, nullUS(p.LeaseUntil), p.WorkerID, p.LeaseToken}
	for i, tenant := range tenants {
		if i > 0 {
			sb.WriteString("\n    UNION ALL ")
		}
		ti, li := strconv.Itoa(6+i), strconv.Itoa(ns[i])
		sb.WriteString(`SELECT id FROM (SELECT j.id FROM jobs j WHERE j.queue = ?1 AND j.tenant = ?` + ti + ` AND ` + sqlAvailable("j") +
			` AND j.run_at <= ?2` + kinds + qClaimHead + ` ORDER BY j.priority DESC, j.run_at, j.id LIMIT ` + li + `)`)
		args = append(args, tenant)
	}
	sb.WriteString(`) RETURNING ` + jobCols + `, ` + qKeyHeld)
	for _, kind := range p.Kinds {
		args = append(args, kind)
	}
	return sb.String(), args
}
