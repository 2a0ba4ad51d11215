package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	if err := store.CheckInsertTenants(p.Jobs); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	now := truncUS(store.OrNow(p.Now))
	if len(p.Jobs) == 1 && p.Jobs[0].IdempotencyKey != "" {
		if res, ok := s.existing(ctx, p.Jobs[0], now); ok {
			return []store.JobInsertResult{res}, nil
		}
	}
	var results []store.JobInsertResult
	err := s.w.submit(ctx, len(p.Jobs), writeReq{plain: allPlain(p.Jobs), fn: func(t *wtx) error {
		var err error
		results, err = insertJobs(t, p.Jobs, now)
		return err
	}})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	s.noteKeys(p.Jobs)
	return results, nil
}

// allPlain reports whether every job is plain: no key, no dependencies
// (insertJobs writes their rows with multi-row INSERTs, which the writer
// may defer: writeReq.plain).
func allPlain(jobs []*store.JobInsertParams) bool {
	for _, j := range jobs {
		if j == nil || j.IdempotencyKey != "" || len(j.DependsOn) > 0 {
			return false
		}
	}
	return true
}

// noteKeys adds the keys of jobs to the key filter.
func (s *Store) noteKeys(jobs []*store.JobInsertParams) {
	if s.keys == nil {
		return
	}
	for _, j := range jobs {
		if j.IdempotencyKey != "" {
			s.keys.add(j.Tenant, j.IdempotencyKey)
		}
	}
}

// existing answers a repeated key from the read pool, without taking the
// writer (a key the key filter has certainly never seen skips the read):
// when the key's record is live, its dedup window open and its job still
// stored, the result is that job (or a KeyReusedError for another
// fingerprint). It only reports what is already committed and durable:
// the read may see a group whose WAL fsync has not returned yet, so the
// answer waits for it (durability); whether a job is created is still
// decided by the unique constraint on the write path, which also answers
// every case this read leaves (no row, or a failed fsync).
func (s *Store) existing(ctx context.Context, p *store.JobInsertParams, now time.Time) (store.JobInsertResult, bool) {
	if !s.keys.mayContain(p.Tenant, p.IdempotencyKey) {
		return store.JobInsertResult{}, false // certainly new: no read
	}
	res, ok := s.existingRead(ctx, p, now)
	if !ok {
		return res, false
	}
	// Every group the read could have seen has a number up to this one.
	if err := s.w.durability.wait(ctx, s.w.durability.last(), s.w.failure); err != nil {
		return store.JobInsertResult{}, false
	}
	return res, true
}

// existingRead is existing's read, before the wait for durability.
func (s *Store) existingRead(ctx context.Context, p *store.JobInsertParams, now time.Time) (store.JobInsertResult, bool) {
	if p.Tenant == "" {
		return s.existingAnyTenant(ctx, p, now)
	}
	var (
		fingerprint string
		jobID       int64
		dedupUntil  sql.NullInt64
	)
	job, err := scanJob(prefixScanner{row: s.readRow(ctx, qKeyJobGet, p.Tenant, p.IdempotencyKey, toUS(now)),
		prefix: []any{&fingerprint, &jobID, &dedupUntil}})
	if err != nil || jobID == 0 || (dedupUntil.Valid && dedupUntil.Int64 <= toUS(now)) {
		return store.JobInsertResult{}, false
	}
	if fingerprint != p.Fingerprint {
		return store.JobInsertResult{Err: &idemtype.KeyReusedError{Key: p.IdempotencyKey, JobID: jobID}}, true
	}
	return store.JobInsertResult{Job: job, Existing: true}, true
}

// existingAnyTenant is existing for a job without a tenant: the record
// and the job are read as RecordGet and JobGet read them for "any tenant".
func (s *Store) existingAnyTenant(ctx context.Context, p *store.JobInsertParams, now time.Time) (store.JobInsertResult, bool) {
	rec, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: p.Tenant, Key: p.IdempotencyKey, Now: now})
	if err != nil || rec.JobID == 0 || (rec.DedupUntil != nil && !rec.DedupUntil.After(now)) {
		return store.JobInsertResult{}, false
	}
	if rec.Fingerprint != p.Fingerprint {
		return store.JobInsertResult{Err: &idemtype.KeyReusedError{Key: p.IdempotencyKey, JobID: rec.JobID}}, true
	}
	job, err := s.JobGet(ctx, &store.JobGetParams{Tenant: p.Tenant, ID: rec.JobID})
	if err != nil {
		return store.JobInsertResult{}, false
	}
	return store.JobInsertResult{Job: job, Existing: true}, true
}

// prefixScanner scans the columns of a row that come before the ones the
// caller's scan function reads into prefix.
type prefixScanner struct {
	row    scanner
	prefix []any
}

// Scan implements scanner.
func (p prefixScanner) Scan(dest ...any) error {
	return p.row.Scan(append(p.prefix[:len(p.prefix):len(p.prefix)], dest...)...)
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
		if t.deferOn {
			// The writer writes them with the next ops' (flushDeferred).
			if len(pending) > 0 {
				t.deferred = append(t.deferred, pending...)
				t.deferredOps++
				pending = nil
			}
			return nil
		}
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
		RetryPolicy: jp.RetryPolicy, Timeout: jp.Timeout.Truncate(time.Microsecond),
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
	if len(rows) > 1 && sharedRows(rows) {
		return insertSharedRows(t, rows)
	}
	args := make([]any, 0, len(rows)*jobInsertPlainCols)
	for _, r := range rows {
		args = append(args, r.ID, r.Tenant, r.Queue, r.Kind, []byte(r.Args), string(r.State),
			r.Priority, r.MaxAttempts, toUS(r.RunAt), toUS(r.CreatedAt), r.PartitionKey, nullBytes(r.Metadata), nullBytes(r.RetryPolicy),
			r.Timeout.Microseconds())
	}
	q := qJobInsertPlainHead + strings.Repeat(jobInsertPlainRow+",", len(rows)-1) + jobInsertPlainRow
	if _, err := t.exec(q, args...); err != nil {
		return fmt.Errorf("insert job rows: %w", err)
	}
	return nil
}

// sharedRows reports whether rows differ only in id and args (a batch of
// one kind of job, as EnqueueMany makes them): every other column that
// insertPlainRows binds would be stored equal.
func sharedRows(rows []*idemtype.JobRow) bool {
	a := rows[0]
	for _, r := range rows[1:] {
		if r.Tenant != a.Tenant || r.Queue != a.Queue || r.Kind != a.Kind || r.State != a.State ||
			r.Priority != a.Priority || r.MaxAttempts != a.MaxAttempts || toUS(r.RunAt) != toUS(a.RunAt) ||
			toUS(r.CreatedAt) != toUS(a.CreatedAt) || r.PartitionKey != a.PartitionKey ||
			!sameBlob(r.Metadata, a.Metadata) || !sameBlob(r.RetryPolicy, a.RetryPolicy) ||
			r.Timeout.Microseconds() != a.Timeout.Microseconds() {
			return false
		}
	}
	return true
}

// sameBlob reports whether a and b are stored alike (nullBytes: nil is
// NULL, an empty slice an empty blob).
func sameBlob(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// insertSharedRows is insertPlainRows for rows that differ only in id and
// args (sharedRows): the other columns are bound once for the statement.
// Binding is most of a plain batch's cost outside SQLite's own B-tree work.
func insertSharedRows(t *wtx, rows []*idemtype.JobRow) error {
	a := rows[0]
	args := make([]any, 0, jobInsertSharedCols+2*len(rows))
	args = append(args, a.Tenant, a.Queue, a.Kind, string(a.State), a.Priority, a.MaxAttempts,
		toUS(a.RunAt), toUS(a.CreatedAt), a.PartitionKey, nullBytes(a.Metadata), nullBytes(a.RetryPolicy),
		a.Timeout.Microseconds())
	for _, r := range rows {
		args = append(args, r.ID, []byte(r.Args))
	}
	q := qJobInsertSharedHead + strings.Repeat(jobInsertSharedRow+",", len(rows)-1) + jobInsertSharedRow
	if _, err := t.exec(q, args...); err != nil {
		return fmt.Errorf("insert job rows: %w", err)
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
			r.IdempotencyKey, deps, r.LastError, nullBytes(r.Metadata), dedup, ttl, nullBytes(r.RetryPolicy),
			r.Timeout.Microseconds())
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
	if jp.DependsOnFinished {
		if _, err := t.exec(qJobDepsAny, id); err != nil {
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
		var held bool
		err := t.queryRow(qJobDepState, dep).Scan(&st, &tenant, &held)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != jp.Tenant) {
			return "", "", store.UnknownDependency(dep), nil
		}
		if err != nil {
			return "", "", nil, fmt.Errorf("read dependency: %w", err)
		}
		switch js := idemtype.JobState(st); {
		case js == idemtype.StateDead || js == idemtype.StateCancelled:
			if !jp.DependsOnFinished && state != idemtype.StateCancelled {
				state, lastErr = idemtype.StateCancelled, fmt.Sprintf("dependency %d is %s", dep, js)
			} else if held && state != idemtype.StateCancelled {
				state = idemtype.StatePending // its handler may still run
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
