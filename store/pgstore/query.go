package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// JobGet implements store.Jobs.
func (s *Store) JobGet(ctx context.Context, params *store.JobGetParams) (*idemtype.JobRow, error) {
	tenant, id := params.Tenant, params.ID
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	j, err := scanJob(db.QueryRow(ctx, s.sql(qJobGet), id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// JobList implements store.Jobs.
func (s *Store) JobList(ctx context.Context, p *store.JobListParams) ([]*idemtype.JobRow, int64, error) {
	db, err := s.db()
	if err != nil {
		return nil, 0, err
	}
	limit := store.ListLimit(p.Limit)
	where, args := jobFilterSQL(&p.Filter, 3)
	rows, err := db.Query(ctx, s.sql(qJobList(where)), append([]any{p.Cursor, limit + 1}, args...)...)
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	var next int64
	if len(jobs) > limit {
		jobs = jobs[:limit]
		next = jobs[limit-1].ID
	}
	return jobs, next, nil
}

// AttemptList implements store.Jobs.
func (s *Store) AttemptList(ctx context.Context, params *store.AttemptListParams) ([]*idemtype.Attempt, error) {
	tenant, jobID := params.Tenant, params.JobID
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := db.QueryRow(ctx, s.sql(qJobExists), jobID, tenant).Scan(&exists); err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	if !exists {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, idemtype.ErrNotFound)
	}
	rows, err := db.Query(ctx, s.sql(qAttemptList), jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
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
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	now = store.OrNow(now)
	byQueue := map[string]*store.QueueStat{}
	stat := func(q string) *store.QueueStat {
		if byQueue[q] == nil {
			byQueue[q] = &store.QueueStat{Queue: q, Counts: map[idemtype.JobState]int64{}}
		}
		return byQueue[q]
	}
	rows, err := db.Query(ctx, s.sql(qQueueCounts), tenant, now)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	var q, st string
	var n int64
	var oldest *time.Time
	var unresolved int64
	_, err = pgx.ForEachRow(rows, []any{&q, &st, &n, &oldest, &unresolved}, func() error {
		qs := stat(q)
		qs.Counts[idemtype.JobState(st)] = n
		if idemtype.JobState(st) == idemtype.StateDead {
			qs.DeadUnresolved = unresolved
		}
		if oldest != nil && (qs.OldestAvailable == nil || oldest.Before(*qs.OldestAvailable)) {
			qs.OldestAvailable = utcP(oldest)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	rows, err = db.Query(ctx, s.sql(qQueueAttempts), tenant, now)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	var ok, failed int64
	_, err = pgx.ForEachRow(rows, []any{&q, &ok, &failed}, func() error {
		qs := stat(q)
		qs.Completed1m, qs.Failed1m = ok, failed
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	out := make([]*store.QueueStat, 0, len(byQueue))
	for _, qs := range byQueue {
		out = append(out, qs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

// qJobDurations: $1 tenant ("" = all), $2 since, $3 per queue. The
// jobs_finished_idx index bounds the read to the jobs finished since $2.
const qJobDurations = `SELECT queue, run_at, started_at, finished_at FROM (
  SELECT queue, run_at, started_at, finished_at,
         ROW_NUMBER() OVER (PARTITION BY queue ORDER BY finished_at DESC, id DESC) AS rn
  FROM {schema}.jobs
  WHERE state = 'completed' AND finished_at >= $2 AND ($1 = '' OR tenant = $1)
    AND NOT was_cached AND started_at IS NOT NULL
) d WHERE rn <= $3 ORDER BY queue, finished_at DESC`

// JobDurations implements store.Jobs.
func (s *Store) JobDurations(ctx context.Context, p *store.JobDurationsParams) ([]*store.JobDuration, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	per := p.PerQueue
	if per <= 0 {
		per = 200
	}
	rows, err := db.Query(ctx, s.sql(qJobDurations), p.Tenant, p.Since, per)
	if err != nil {
		return nil, fmt.Errorf("job durations: %w", err)
	}
	var out []*store.JobDuration
	var d store.JobDuration
	_, err = pgx.ForEachRow(rows, []any{&d.Queue, &d.RunAt, &d.StartedAt, &d.FinishedAt}, func() error {
		c := d
		c.RunAt, c.StartedAt, c.FinishedAt = c.RunAt.UTC(), c.StartedAt.UTC(), c.FinishedAt.UTC()
		out = append(out, &c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("job durations: %w", err)
	}
	return out, nil
}

// JobKindStats implements store.Jobs.
func (s *Store) JobKindStats(ctx context.Context, p *store.JobKindStatsParams) ([]*store.JobKindStat, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, s.sql(qJobKindStats), p.Tenant, p.Since, p.FinishedSince())
	if err != nil {
		return nil, fmt.Errorf("job kind stats: %w", err)
	}
	var groups []store.KindStatsRow
	var r store.KindStatsRow
	_, err = pgx.ForEachRow(rows, []any{&r.Kind, &r.State, &r.Count, &r.Started, &r.Retried, &r.Runs, &r.SumMS, &r.MaxMS}, func() error {
		groups = append(groups, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("job kind stats: %w", err)
	}
	return store.FoldKindStats(groups), nil
}
