package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobInsertMany implements store.Jobs.
func (s *Store) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	if p == nil || len(p.Jobs) == 0 {
		return nil, nil
	}
	now := truncUS(store.OrNow(p.Now))
	if len(p.Jobs) == 1 && p.Jobs[0].IdempotencyKey != "" {
		if res, ok := s.existing(ctx, p.Jobs[0], now); ok {
			return []store.JobInsertResult{res}, nil
		}
	}
	var results []store.JobInsertResult
	err := s.write(ctx, len(p.Jobs), func(t *wtx) error {
		var err error
		results, err = insertJobs(t, p.Jobs, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return results, nil
}

// existing answers a repeated key from the read pool, without taking the
// writer: when the key's record is live, its dedup window open and its job
// still stored, the result is that job (or a KeyReusedError for another
// fingerprint). It only reports what is already committed; whether a job is
// created is still decided by the unique constraint on the write path.
func (s *Store) existing(ctx context.Context, p *store.JobInsertParams, now time.Time) (store.JobInsertResult, bool) {
	rec, err := s.RecordGet(ctx, p.Tenant, p.IdempotencyKey, now)
	if err != nil || rec.JobID == 0 || (rec.DedupUntil != nil && !rec.DedupUntil.After(now)) {
		return store.JobInsertResult{}, false
	}
	if rec.Fingerprint != p.Fingerprint {
		return store.JobInsertResult{Err: &idemtype.KeyReusedError{Key: p.IdempotencyKey, JobID: rec.JobID}}, true
	}
	job, err := s.JobGet(ctx, p.Tenant, rec.JobID)
	if err != nil {
		return store.JobInsertResult{}, false
	}
	return store.JobInsertResult{Job: job, Existing: true}, true
}

// plainBatch is how many unkeyed, dependency-free jobs go in one multi-row INSERT.
const plainBatch = 128

func insertJobs(t *wtx, jobs []*store.JobInsertParams, now time.Time) ([]store.JobInsertResult, error) {
	results := make([]store.JobInsertResult, len(jobs))
	// Plain jobs (no key, no dependencies) are gathered and inserted with
	// multi-row INSERTs; the rest go one by one. Ids follow item order
	// because ids are allocated here, not by the INSERT.
	var pending []*idemtype.JobRow
	flush := func() error {
		for len(pending) > 0 {
			n := len(pending)
			if n > plainBatch {
				n = plainBatch
			}
			if err := insertPlainRows(t, pending[:n]); err != nil {
				return err
			}
			pending = pending[n:]
		}
		return nil
	}
	for i, jp := range jobs {
		if jp == nil {
			results[i].Err = idemtype.Invalid("job", "nil job")
			continue
		}
		if jp.IdempotencyKey == "" && len(jp.DependsOn) == 0 {
			id, err := t.takeID()
			if err != nil {
				return nil, err
			}
			row := newRow(id, jp, now, idemtype.StateAvailable, "")
			results[i].Job = row
			pending = append(pending, row)
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		res, err := insertOne(t, jp, now)
		if err != nil {
			return nil, err
		}
		results[i] = res
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return results, nil
}

// newRow builds the stored row of a new job.
func newRow(id int64, jp *store.JobInsertParams, now time.Time, state idemtype.JobState, lastErr string) *idemtype.JobRow {
	args := jp.Args
	if len(args) == 0 {
		args = []byte("{}")
	}
	row := &idemtype.JobRow{
		ID: id, Tenant: jp.Tenant, Queue: jp.Queue, Kind: jp.Kind, Args: args,
		State: state, Priority: jp.Priority, MaxAttempts: jp.MaxAttempts,
		RunAt: truncUS(jp.RunAt), CreatedAt: now, PartitionKey: jp.PartitionKey,
		IdempotencyKey: jp.IdempotencyKey, Metadata: jp.Metadata, LastError: lastErr,
		RetryPolicy: jp.RetryPolicy,
	}
	if jp.RunAt.IsZero() {
		row.RunAt = now
	}
	if row.State == idemtype.StateAvailable && row.RunAt.After(now) {
		row.State = idemtype.StateScheduled
	}
	if len(jp.DependsOn) > 0 {
		row.DependsOn = append([]int64(nil), jp.DependsOn...)
	}
	if state.Finished() {
		f := now
		row.FinishedAt = &f
	}
	return row
}

// insertPlainRows inserts jobs without key or dependencies with one
// multi-row INSERT binding only the columns they set.
func insertPlainRows(t *wtx, rows []*idemtype.JobRow) error {
	args := make([]any, 0, len(rows)*jobInsertPlainCols)
	for _, r := range rows {
		args = append(args, r.ID, r.Tenant, r.Queue, r.Kind, []byte(r.Args), string(r.State),
			r.Priority, r.MaxAttempts, toUS(r.RunAt), toUS(r.CreatedAt), r.PartitionKey, nullBytes(r.Metadata), nullBytes(r.RetryPolicy))
	}
	q := qJobInsertPlainHead + strings.Repeat(jobInsertPlainRow+",", len(rows)-1) + jobInsertPlainRow
	if _, err := t.exec(q, args...); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	return nil
}

// insertRows inserts rows with one multi-row INSERT. params supplies the
// dedup window and result TTL per row (nil = zero).
func insertRows(t *wtx, rows []*idemtype.JobRow, params []*store.JobInsertParams) error {
	args := make([]any, 0, len(rows)*jobInsertCols)
	for i, r := range rows {
		var dedup, ttl int64
		if params != nil {
			dedup, ttl = params[i].DedupWindow.Microseconds(), params[i].ResultTTL.Microseconds()
		}
		var finished any
		if r.FinishedAt != nil {
			finished = toUS(*r.FinishedAt)
		}
		var deps any
		if len(r.DependsOn) > 0 {
			deps = formatIDs(r.DependsOn)
		}
		args = append(args, r.ID, r.Tenant, r.Queue, r.Kind, []byte(r.Args), string(r.State),
			r.Priority, r.MaxAttempts, toUS(r.RunAt), toUS(r.CreatedAt), finished, r.PartitionKey,
			r.IdempotencyKey, deps, r.LastError, nullBytes(r.Metadata), dedup, ttl, nullBytes(r.RetryPolicy))
	}
	q := qJobInsert
	if len(rows) > 1 {
		q = qJobInsertMultiHead + strings.Repeat(jobInsertRow+",", len(rows)-1) + jobInsertRow
	}
	if _, err := t.exec(q, args...); err != nil {
		return fmt.Errorf("insert job: %w", err)
	}
	return nil
}

// insertOne inserts a job with a key or dependencies. Logical failures are
// decided before anything is written, so they need no savepoint.
func insertOne(t *wtx, jp *store.JobInsertParams, now time.Time) (store.JobInsertResult, error) {
	state, lastErr, itemErr, err := initialState(t, jp)
	if err != nil || itemErr != nil {
		return store.JobInsertResult{Err: itemErr}, err
	}
	id, err := t.peekID()
	if err != nil {
		return store.JobInsertResult{}, err
	}
	if jp.IdempotencyKey != "" {
		var dedupUntil any
		if jp.DedupWindow > 0 {
			dedupUntil = toUS(now.Add(jp.DedupWindow))
		}
		res, err := t.exec(qKeyTake, jp.Tenant, jp.IdempotencyKey, jp.Fingerprint, id, toUS(now), dedupUntil,
			jp.ResultTTL.Microseconds())
		if err != nil {
			return store.JobInsertResult{}, fmt.Errorf("take key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return existing(t, jp)
		}
	}
	if _, err := t.takeID(); err != nil {
		return store.JobInsertResult{}, err
	}
	row := newRow(id, jp, now, state, lastErr)
	if err := insertRows(t, []*idemtype.JobRow{row}, []*store.JobInsertParams{jp}); err != nil {
		return store.JobInsertResult{}, err
	}
	for _, dep := range row.DependsOn {
		if _, err := t.exec(qJobDepInsert, id, dep); err != nil {
			return store.JobInsertResult{}, fmt.Errorf("insert dependency: %w", err)
		}
	}
	if row.State.Finished() {
		if err := onFinal(t, row.Tenant, row.IdempotencyKey, row.ID, jp.DedupWindow.Microseconds(), jp.ResultTTL.Microseconds(), now); err != nil {
			return store.JobInsertResult{}, err
		}
	}
	return store.JobInsertResult{Job: row}, nil
}

// initialState decides a new job's state from its dependencies.
func initialState(t *wtx, jp *store.JobInsertParams) (state idemtype.JobState, lastErr string, itemErr, err error) {
	state = idemtype.StateAvailable
	for _, dep := range jp.DependsOn {
		var st, tenant string
		err := t.queryRow(qJobDepState, dep).Scan(&st, &tenant)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != jp.Tenant) {
			return "", "", fmt.Errorf("dependency %d: %w", dep, idemtype.ErrNotFound), nil
		}
		if err != nil {
			return "", "", nil, fmt.Errorf("read dependency: %w", err)
		}
		switch js := idemtype.JobState(st); {
		case js == idemtype.StateDead || js == idemtype.StateCancelled:
			if state != idemtype.StateCancelled {
				state, lastErr = idemtype.StateCancelled, fmt.Sprintf("dependency %d is %s", dep, js)
			}
		case !js.Finished() && state != idemtype.StateCancelled:
			state = idemtype.StatePending
		}
	}
	return state, lastErr, nil, nil
}

// existing answers an insert whose key is in its dedup window.
func existing(t *wtx, jp *store.JobInsertParams) (store.JobInsertResult, error) {
	var jobID int64
	var fp string
	if err := t.queryRow(qKeyGet, jp.Tenant, jp.IdempotencyKey).Scan(&jobID, &fp); err != nil {
		return store.JobInsertResult{}, fmt.Errorf("read key: %w", err)
	}
	if fp != jp.Fingerprint {
		return store.JobInsertResult{Err: &idemtype.KeyReusedError{Key: jp.IdempotencyKey, JobID: jobID}}, nil
	}
	row, err := scanJob(t.queryRow(qJobGet, jobID))
	if err != nil {
		return store.JobInsertResult{}, fmt.Errorf("read existing job: %w", err)
	}
	return store.JobInsertResult{Job: row, Existing: true}, nil
}

// JobGet implements store.Jobs.
func (s *Store) JobGet(ctx context.Context, tenant string, id int64) (*idemtype.JobRow, error) {
	var row *sql.Row
	if tenant == "" {
		row = s.readRow(ctx, qJobGet, id)
	} else {
		row = s.readRow(ctx, qJobGetTenant, id, tenant)
	}
	j, err := scanJob(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, s.readErr(err))
	}
	return j, nil
}

// filterSQL appends the WHERE terms of f (table alias-free) to sb and args.
func filterSQL(sb *strings.Builder, args []any, f *store.JobFilter) []any {
	if f.Tenant != "" {
		sb.WriteString(" AND tenant = ?")
		args = append(args, f.Tenant)
	}
	if len(f.States) > 0 {
		sb.WriteString(" AND state IN (" + placeholders(len(f.States)) + ")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if f.Queue != "" {
		sb.WriteString(" AND queue = ?")
		args = append(args, f.Queue)
	}
	if f.Kind != "" {
		sb.WriteString(" AND kind = ?")
		args = append(args, f.Kind)
	}
	if f.PartitionKey != "" {
		sb.WriteString(" AND partition_key = ?")
		args = append(args, f.PartitionKey)
	}
	if f.IdempotencyKey != "" {
		sb.WriteString(" AND idempotency_key = ?")
		args = append(args, f.IdempotencyKey)
	}
	if !f.Since.IsZero() {
		sb.WriteString(" AND created_at >= ?")
		args = append(args, toUS(f.Since))
	}
	if !f.Until.IsZero() {
		sb.WriteString(" AND created_at < ?")
		args = append(args, toUS(f.Until))
	}
	return args
}

func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// MaxListLimit is the largest page JobList returns.
const MaxListLimit = 500

// JobList implements store.Jobs.
func (s *Store) JobList(ctx context.Context, p *store.JobListParams) ([]*idemtype.JobRow, int64, error) {
	limit := p.Limit
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	var sb strings.Builder
	sb.WriteString("SELECT " + jobCols + " FROM jobs WHERE 1=1")
	args := filterSQL(&sb, nil, &p.Filter)
	if p.Cursor > 0 {
		sb.WriteString(" AND id < ?")
		args = append(args, p.Cursor)
	}
	sb.WriteString(" ORDER BY id DESC LIMIT ?")
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*idemtype.JobRow
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// JobClaim implements store.Jobs.
func (s *Store) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	if len(p.Queues) == 0 {
		return nil, fmt.Errorf("claim jobs: %w", idemtype.Invalid("queues", "at least one queue"))
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	now := toUS(store.OrNow(p.Now))
	// UPDATE … WHERE id IN (candidates) RETURNING: one statement claims the
	// batch; each row gets its own random token from SQLite's CSPRNG.
	var sb strings.Builder
	args := []any{now, nullUS(p.LeaseUntil), p.WorkerID}
	sb.WriteString(`UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at = ?1,
    lease_token = lower(hex(randomblob(16))), lease_expires_at = ?2, worker_id = ?3
WHERE id IN (SELECT j.id FROM jobs j WHERE j.` + sqlClaimable + ` AND j.run_at <= ?1 AND j.queue IN (`)
	for i, q := range p.Queues {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('?')
		args = append(args, q)
	}
	sb.WriteByte(')')
	if len(p.Kinds) > 0 {
		sb.WriteString(" AND j.kind IN (" + placeholders(len(p.Kinds)) + ")")
		for _, k := range p.Kinds {
			args = append(args, k)
		}
	}
	if p.Tenant != "" {
		sb.WriteString(" AND j.tenant = ?")
		args = append(args, p.Tenant)
	}
	sb.WriteString(qClaimHead)
	// The limit is part of the text, not a parameter: SQLite plans with a
	// bound LIMIT's value, so rebinding another limit would expire the
	// statement and recompile it on every claim. Each limit gets its own
	// cached statement instead.
	sb.WriteString(" ORDER BY j.priority DESC, j.run_at, j.id LIMIT " + strconv.Itoa(p.Limit) + ") RETURNING " + jobCols)
	q := sb.String()

	var out []*idemtype.JobRow
	err := s.write(ctx, p.Limit, func(t *wtx) error {
		out = out[:0]
		rows, err := t.query(q, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, j)
		}
		rows.Close()
		// The attempt is stored as a row only when it ends; until then
		// AttemptList reads it from the job row.
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !x.RunAt.Equal(y.RunAt) {
			return x.RunAt.Before(y.RunAt)
		}
		return x.ID < y.ID
	})
	return out, nil
}

// JobHeartbeatMany implements store.Jobs.
func (s *Store) JobHeartbeatMany(ctx context.Context, p *store.JobHeartbeatParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return nil, nil
	}
	until := toUS(p.Until)
	now := toUS(store.OrNow(p.Now))
	errs := make([]error, len(p.Leases))
	err := s.write(ctx, len(p.Leases), func(t *wtx) error {
		for i, l := range p.Leases {
			var tenant, key string
			err := t.queryRow(qHeartbeat, until, l.ID, l.Token, now).Scan(&tenant, &key)
			if errors.Is(err, sql.ErrNoRows) {
				errs[i] = fmt.Errorf("heartbeat job %d: %w", l.ID, idemtype.ErrLeaseLost)
				continue
			}
			if err != nil {
				return err
			}
			errs[i] = nil
			if key != "" {
				if _, err := t.exec(qKeyLeaseExtend, until, tenant, key, store.JobOwner(l.ID)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	return errs, nil
}

// JobFinishMany implements store.Jobs.
func (s *Store) JobFinishMany(ctx context.Context, ps []*store.JobFinishParams) ([]error, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	errs := make([]error, len(ps))
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	idList := jsonIDs(ids)
	err := s.write(ctx, len(ps), func(t *wtx) error {
		deps, err := withDependants(t, idList)
		if err != nil {
			return err
		}
		if distinctIDs(ps) {
			es, err := finishBatch(t, ps, deps)
			if err != nil {
				return err
			}
			copy(errs, es)
			return nil
		}
		for i, p := range ps {
			e, err := finishOne(t, p, deps[p.ID])
			if err != nil {
				return err
			}
			errs[i] = e
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return errs, nil
}

// finishOne ends one attempt; it returns the item's error and an error that
// fails the whole operation.
func finishOne(t *wtx, p *store.JobFinishParams, hasDependants bool) (error, error) {
	fin := store.OrNow(p.FinishedAt)
	finUS := toUS(fin)
	var finished, runAt any
	if p.State.Finished() {
		finished = finUS
	}
	if (p.State == idemtype.StateRetryable || p.State == idemtype.StateScheduled) && !p.RunAt.IsZero() {
		runAt = toUS(p.RunAt)
	}
	var result any
	if p.State == idemtype.StateCompleted {
		result = nullBytes(p.Result)
	}
	var (
		tenant, key string
		dedupUS     int64
		ttlUS       int64
	)
	// The attempt row is written once, now that it ended, from the job row
	// as it still is (attempt number, started_at, worker); only while the
	// job runs under this token, so a repeat completion writes nothing.
	if _, err := t.exec(qAttemptInsertFinish, p.ID, p.LeaseToken, finUS, p.DurationMS, string(p.Outcome),
		p.Error, p.Target, p.HTTPStatus); err != nil {
		return nil, fmt.Errorf("end attempt: %w", err)
	}
	err := t.queryRow(qJobFinish, string(p.State), finished, p.Error, result, boolInt(p.WasCached),
		p.OriginalJobID, runAt, boolInt(p.Snooze), p.ID, p.LeaseToken).Scan(&tenant, &key, &dedupUS, &ttlUS)
	if errors.Is(err, sql.ErrNoRows) {
		return repeatCompletion(t, p)
	}
	if err != nil {
		return nil, err
	}
	return nil, finishTail(t, p, hasDependants, finishedRow{tenant: tenant, key: key, dedupUS: dedupUS, ttlUS: ttlUS})
}

// finishTail does what a finished job needs beyond its own row and attempt:
// its dependants and its idempotency record.
func finishTail(t *wtx, p *store.JobFinishParams, hasDependants bool, r finishedRow) error {
	fin := store.OrNow(p.FinishedAt)
	finUS := toUS(fin)
	tenant, key, dedupUS, ttlUS := r.tenant, r.key, r.dedupUS, r.ttlUS
	owner := store.JobOwner(p.ID)
	switch {
	case !hasDependants:
	case p.State == idemtype.StateCompleted:
		if _, err := t.exec(qDependantsRelease, finUS, p.ID); err != nil {
			return fmt.Errorf("release dependants: %w", err)
		}
	case p.State == idemtype.StateDead || p.State == idemtype.StateCancelled:
		if err := cancelDependants(t, p.ID, p.State, finUS); err != nil {
			return err
		}
	}
	if key == "" {
		return nil
	}
	if p.State.Finished() {
		if err := onFinal(t, tenant, key, p.ID, dedupUS, ttlUS, fin); err != nil {
			return err
		}
	}
	if p.State == idemtype.StateCompleted && !p.WasCached {
		rec := p.RecordResult
		if rec == nil {
			rec = []byte{}
		}
		if _, err := t.exec(qKeyComplete, rec, p.ResultHash, boolInt(p.RecordCompressed), p.ID, finUS,
			ttlUS, p.DurationMS, tenant, key, owner); err != nil {
			return fmt.Errorf("complete record: %w", err)
		}
		return nil
	}
	if _, err := t.exec(qKeyLeaseRelease, tenant, key, owner); err != nil {
		return fmt.Errorf("release record lease: %w", err)
	}
	return nil
}

// jsonIDs formats ids as a JSON array (for json_each).
func jsonIDs(ids []int64) string {
	return "[" + formatIDs(ids) + "]"
}

// withDependants returns which jobs of the JSON id list have dependants.
func withDependants(t *wtx, idList string) (map[int64]bool, error) {
	ids, err := selectIDs(t, qHasDependants, idList)
	if err != nil {
		return nil, fmt.Errorf("find dependants: %w", err)
	}
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m, nil
}

// repeatCompletion decides a finish whose lease does not match: a repeat of
// the same completion is accepted, anything else lost its lease.
func repeatCompletion(t *wtx, p *store.JobFinishParams) (error, error) {
	lost := fmt.Errorf("finish job %d: %w", p.ID, idemtype.ErrLeaseLost)
	if p.State != idemtype.StateCompleted {
		return lost, nil
	}
	var state, token string
	var result []byte
	err := t.queryRow(qJobFinishedCheck, p.ID).Scan(&state, &token, &result)
	if errors.Is(err, sql.ErrNoRows) {
		return lost, nil
	}
	if err != nil {
		return nil, err
	}
	if state == string(idemtype.StateCompleted) && token == p.LeaseToken && token != "" && sameJSON(result, p.Result) {
		return nil, nil
	}
	return lost, nil
}

func sameJSON(a, b []byte) bool {
	return string(a) == string(b)
}

// onFinal updates the record of a job that reached a final state: a window-0
// key stops blocking (DedupUntil = finish), and a record without an expiry
// gets one.
func onFinal(t *wtx, tenant, key string, id, dedupUS, ttlUS int64, fin time.Time) error {
	if key == "" {
		return nil
	}
	q := qKeyFinalWindow
	if dedupUS == 0 {
		q = qKeyFinal
	}
	if _, err := t.exec(q, toUS(fin), tenant, key, id, ttlUS); err != nil {
		return fmt.Errorf("finalise record: %w", err)
	}
	return nil
}

// cancelDependants cancels the pending dependants of id, transitively.
func cancelDependants(t *wtx, id int64, state idemtype.JobState, finUS int64) error {
	type item struct {
		id    int64
		state idemtype.JobState
	}
	queue := []item{{id, state}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		msg := fmt.Sprintf("dependency %d is %s", cur.id, cur.state)
		rows, err := t.query(qDependantsCancel, finUS, msg, cur.id)
		if err != nil {
			return fmt.Errorf("cancel dependants: %w", err)
		}
		type keyed struct {
			id          int64
			tenant, key string
			dedup, ttl  int64
		}
		var ks []keyed
		for rows.Next() {
			var k keyed
			if err := rows.Scan(&k.id, &k.tenant, &k.key, &k.dedup, &k.ttl); err != nil {
				rows.Close()
				return err
			}
			ks = append(ks, k)
			queue = append(queue, item{k.id, idemtype.StateCancelled})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, k := range ks {
			if err := onFinal(t, k.tenant, k.key, k.id, k.dedup, k.ttl, fromUS(finUS)); err != nil {
				return err
			}
		}
	}
	return nil
}

// JobCancel implements store.Jobs.
func (s *Store) JobCancel(ctx context.Context, p *store.JobCancelParams) (*idemtype.JobRow, error) {
	now := truncUS(store.OrNow(p.Now))
	var out *idemtype.JobRow
	err := s.write(ctx, 1, func(t *wtx) error {
		j, err := scanJob(t.queryRow(qJobCancelGet, p.ID, p.Tenant))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", p.ID, idemtype.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if j.State.Finished() {
			return fmt.Errorf("job %d is %s: %w", p.ID, j.State, idemtype.ErrWrongState)
		}
		nowUS := toUS(now)
		if j.State == idemtype.StateRunning {
			if _, err := t.exec(qAttemptEndNow, nowUS, p.Reason, p.ID, string(idemtype.OutcomeCancelled), ""); err != nil {
				return err
			}
		}
		if out, err = scanJob(t.queryRow(qJobCancel, nowUS, p.Reason, p.ID)); err != nil {
			return err
		}
		if err := cancelDependants(t, p.ID, idemtype.StateCancelled, nowUS); err != nil {
			return err
		}
		if j.IdempotencyKey != "" {
			var dedup, ttl int64
			if err := t.queryRow(qJobKeyTimes, p.ID).Scan(&dedup, &ttl); err != nil {
				return err
			}
			if err := onFinal(t, j.Tenant, j.IdempotencyKey, p.ID, dedup, ttl, now); err != nil {
				return err
			}
			if _, err := t.exec(qKeyLeaseRelease, j.Tenant, j.IdempotencyKey, store.JobOwner(p.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job: %w", err)
	}
	return out, nil
}

// DefaultRetryFilterLimit is JobRetryMany's limit for a filter when none is given.
const DefaultRetryFilterLimit = 1000

// JobRetryMany implements store.Jobs.
func (s *Store) JobRetryMany(ctx context.Context, p *store.JobRetryManyParams) ([]*idemtype.JobRow, error) {
	now := store.OrNow(p.Now)
	runAt := now
	if !p.RunAt.IsZero() {
		runAt = p.RunAt
	}
	from := p.FromStates
	if len(from) == 0 {
		from = []idemtype.JobState{idemtype.StateDead, idemtype.StateCancelled}
	}
	var okFrom []idemtype.JobState
	for _, st := range from {
		if st == idemtype.StateDead || st == idemtype.StateCancelled {
			okFrom = append(okFrom, st)
		}
	}
	if len(okFrom) == 0 {
		return nil, nil
	}
	var sb strings.Builder
	var args []any
	sb.WriteString("SELECT id FROM jobs WHERE state IN (" + placeholders(len(okFrom)) + ")")
	for _, st := range okFrom {
		args = append(args, string(st))
	}
	limit := p.Limit
	if len(p.IDs) > 0 {
		sb.WriteString(" AND id IN (" + placeholders(len(p.IDs)) + ")")
		for _, id := range p.IDs {
			args = append(args, id)
		}
		if p.Filter.Tenant != "" {
			sb.WriteString(" AND tenant = ?")
			args = append(args, p.Filter.Tenant)
		}
	} else {
		f := p.Filter
		f.States = nil
		args = filterSQL(&sb, args, &f)
		if limit <= 0 {
			limit = DefaultRetryFilterLimit
		}
	}
	sb.WriteString(" ORDER BY id")
	if limit > 0 {
		sb.WriteString(" LIMIT ?")
		args = append(args, limit)
	}
	sel := sb.String()
	var out []*idemtype.JobRow
	err := s.write(ctx, max(1, limit), func(t *wtx) error {
		out = out[:0]
		rows, err := t.query(sel, args...)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			j, err := scanJob(t.queryRow(qJobRetry, toUS(runAt), toUS(now), id))
			if err != nil {
				return err
			}
			out = append(out, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retry jobs: %w", err)
	}
	return out, nil
}

// JobDelete implements store.Jobs.
func (s *Store) JobDelete(ctx context.Context, tenant string, id int64, state idemtype.JobState) error {
	err := s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(qJobDelete, id, string(state), tenant)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("job %d in state %s: %w", id, state, idemtype.ErrNotFound)
		}
		if err := raiseSeq(t, id); err != nil {
			return err
		}
		return deleteJobChildren(t, id)
	})
	if err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	return nil
}

// raiseSeq keeps the id high-water mark at or above a deleted job's id, so
// that its id is never allocated again.
func raiseSeq(t *wtx, id int64) error {
	if _, err := t.exec(qJobSeqRaise, id); err != nil {
		return fmt.Errorf("bump job sequence: %w", err)
	}
	return nil
}

func deleteJobChildren(t *wtx, id int64) error {
	if _, err := t.exec(qAttemptsDelete, id); err != nil {
		return err
	}
	_, err := t.exec(qJobDepsDelete, id)
	return err
}

// AttemptList implements store.Jobs.
func (s *Store) AttemptList(ctx context.Context, tenant string, jobID int64) ([]*idemtype.Attempt, error) {
	var n int
	if err := s.readRow(ctx, qJobExists, jobID, tenant).Scan(&n); err != nil {
		return nil, fmt.Errorf("list attempts: %w", s.readErr(err))
	}
	if n == 0 {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, idemtype.ErrNotFound)
	}
	rows, err := s.readRows(ctx, qAttemptList, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*idemtype.Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("list attempts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return out, nil
}

// QueueStats implements store.Jobs.
func (s *Store) QueueStats(ctx context.Context, tenant string, now time.Time) ([]*store.QueueStat, error) {
	now = store.OrNow(now)
	byQueue := map[string]*store.QueueStat{}
	get := func(q string) *store.QueueStat {
		st, ok := byQueue[q]
		if !ok {
			st = &store.QueueStat{Queue: q, Counts: map[idemtype.JobState]int64{}}
			byQueue[q] = st
		}
		return st
	}
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, qStatsCounts, tenant)
		if err != nil {
			return err
		}
		for rows.Next() {
			var q, st string
			var n int64
			if err := rows.Scan(&q, &st, &n); err != nil {
				rows.Close()
				return err
			}
			get(q).Counts[idemtype.JobState(st)] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, qStatsOldest, tenant, toUS(now))
		if err != nil {
			return err
		}
		for rows.Next() {
			var q string
			var us int64
			if err := rows.Scan(&q, &us); err != nil {
				rows.Close()
				return err
			}
			t := fromUS(us)
			get(q).OldestAvailable = &t
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, qStats1m, tenant, toUS(now.Add(-time.Minute)))
		if err != nil {
			return err
		}
		for rows.Next() {
			var q string
			var c, f int64
			if err := rows.Scan(&q, &c, &f); err != nil {
				rows.Close()
				return err
			}
			st := get(q)
			st.Completed1m, st.Failed1m = c, f
		}
		rows.Close()
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", s.readErr(err))
	}
	out := make([]*store.QueueStat, 0, len(byQueue))
	for _, st := range byQueue {
		out = append(out, st)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Queue < out[b].Queue })
	return out, nil
}

// readTx runs fn in one read transaction (a consistent snapshot).
func (s *Store) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}
