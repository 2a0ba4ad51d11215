package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobGet implements store.Jobs.
func (s *Store) JobGet(ctx context.Context, params *store.JobGetParams) (*idemtype.JobRow, error) {
	tenant, id := params.Tenant, params.ID
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
		// Each state once: a caller's filter may repeat one any number
		// of times, and SQLite caps the parameters of a statement.
		states := slices.Compact(slices.Sorted(slices.Values(f.States)))
		sb.WriteString(" AND state IN (" + placeholders(len(states)) + ")")
		for _, st := range states {
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
		sb.WriteString(" AND partition_key = ? AND partition_key <> ''")
		args = append(args, f.PartitionKey)
	}
	if f.IdempotencyKey != "" {
		sb.WriteString(" AND idempotency_key = ? AND idempotency_key <> ''")
		args = append(args, f.IdempotencyKey)
	}
	if f.BatchID != 0 {
		sb.WriteString(" AND batch_id = ?")
		args = append(args, f.BatchID)
	}
	if f.ErrorCode != "" {
		sb.WriteString(" AND error_code = ?")
		args = append(args, f.ErrorCode)
	}
	if f.Resolved != nil {
		if *f.Resolved {
			sb.WriteString(" AND resolved_at IS NOT NULL")
		} else {
			sb.WriteString(" AND resolved_at IS NULL")
		}
	}
	if !f.Since.IsZero() {
		sb.WriteString(" AND created_at >= ?")
		args = append(args, toUS(f.Since))
	}
	if !f.Until.IsZero() {
		sb.WriteString(" AND created_at < ?")
		args = append(args, toUS(f.Until))
	}
	if !f.FinishedSince.IsZero() {
		sb.WriteString(" AND finished_at >= ?")
		args = append(args, toUS(f.FinishedSince))
	}
	return args
}

func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// jobListSQL returns the query of one JobList page (limit+1 rows).
func jobListSQL(p *store.JobListParams, limit int) (string, []any) {
	var sb strings.Builder
	sb.WriteString("SELECT " + jobCols + " FROM jobs WHERE 1=1")
	args := filterSQL(&sb, nil, &p.Filter)
	if p.Cursor > 0 {
		sb.WriteString(" AND id < ?")
		args = append(args, p.Cursor)
	}
	sb.WriteString(" ORDER BY id DESC LIMIT ?")
	return sb.String(), append(args, limit+1)
}

// JobList implements store.Jobs.
func (s *Store) JobList(ctx context.Context, p *store.JobListParams) ([]*idemtype.JobRow, int64, error) {
	limit := store.ListLimit(p.Limit)
	query, args := jobListSQL(p, limit)
	rows, err := s.rdb.QueryContext(ctx, query, args...)
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

// AttemptList implements store.Jobs.
func (s *Store) AttemptList(ctx context.Context, params *store.AttemptListParams) ([]*idemtype.Attempt, error) {
	tenant, jobID := params.Tenant, params.JobID
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
	out, err := collect(rows, scanAttempt)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return out, nil
}

// QueueStats implements store.Jobs.
func (s *Store) QueueStats(ctx context.Context, params *store.QueueStatsParams) ([]*store.QueueStat, error) {
	tenant, now := params.Tenant, params.Now
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
			var n, unresolved int64
			if err := rows.Scan(&q, &st, &n, &unresolved); err != nil {
				rows.Close()
				return err
			}
			get(q).Counts[idemtype.JobState(st)] = n
			if idemtype.JobState(st) == idemtype.StateDead {
				get(q).DeadUnresolved = unresolved
			}
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

// qJobDurations: $1 tenant ("" = all), $2 since (µs), $3 per queue. The
// jobs_finished index bounds the read to the jobs finished since $2.
const qJobDurations = `SELECT queue, run_at, started_at, finished_at FROM (
  SELECT queue, run_at, started_at, finished_at,
         ROW_NUMBER() OVER (PARTITION BY queue ORDER BY finished_at DESC, id DESC) AS rn
  FROM jobs
  WHERE state = 'completed' AND finished_at >= ?2 AND (?1 = '' OR tenant = ?1)
    AND was_cached = 0 AND started_at IS NOT NULL
) WHERE rn <= ?3 ORDER BY queue, finished_at DESC`

// JobDurations implements store.Jobs.
func (s *Store) JobDurations(ctx context.Context, p *store.JobDurationsParams) ([]*store.JobDuration, error) {
	per := p.PerQueue
	if per <= 0 {
		per = 200
	}
	rows, err := s.rdb.QueryContext(ctx, qJobDurations, p.Tenant, toUS(p.Since), per)
	if err != nil {
		return nil, fmt.Errorf("job durations: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*store.JobDuration
	for rows.Next() {
		var d store.JobDuration
		var runAt, started, finished int64
		if err := rows.Scan(&d.Queue, &runAt, &started, &finished); err != nil {
			return nil, fmt.Errorf("job durations: %w", err)
		}
		d.RunAt, d.StartedAt, d.FinishedAt = fromUS(runAt), fromUS(started), fromUS(finished)
		out = append(out, &d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job durations: %w", err)
	}
	return out, nil
}

// JobKindStats implements store.Jobs.
func (s *Store) JobKindStats(ctx context.Context, p *store.JobKindStatsParams) ([]*store.JobKindStat, error) {
	since := toUS(p.Since)
	rows, err := s.rdb.QueryContext(ctx, qJobKindStats, p.Tenant, since, toUS(p.FinishedSince()))
	if err != nil {
		return nil, fmt.Errorf("job kind stats: %w", s.readErr(err))
	}
	defer rows.Close()
	var groups []store.KindStatsRow
	for rows.Next() {
		var r store.KindStatsRow
		if err := rows.Scan(&r.Kind, &r.State, &r.Count, &r.Started, &r.Retried, &r.Runs, &r.SumMS, &r.MaxMS); err != nil {
			return nil, fmt.Errorf("job kind stats: %w", err)
		}
		groups = append(groups, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job kind stats: %w", err)
	}
	return store.FoldKindStats(groups), nil
}
