package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The queries of the schedules table.
const (
	scheduleCols    = `tenant, name, spec, created_at, updated_at, last_fired_at, last_job_id`
	qScheduleUpsert = `INSERT INTO {schema}.schedules (tenant, name, spec, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
ON CONFLICT (tenant, name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at
RETURNING ` + scheduleCols
	qScheduleGet     = `SELECT ` + scheduleCols + ` FROM {schema}.schedules WHERE tenant = $1 AND name = $2`
	qScheduleList    = `SELECT ` + scheduleCols + ` FROM {schema}.schedules WHERE $1 = '' OR tenant = $1 ORDER BY tenant, name`
	qScheduleDelete  = `DELETE FROM {schema}.schedules WHERE tenant = $1 AND name = $2`
	qScheduleFired   = `UPDATE {schema}.schedules SET last_fired_at = $3, last_job_id = COALESCE(NULLIF($4::bigint, 0), last_job_id) WHERE tenant = $1 AND name = $2 AND (last_fired_at IS NULL OR last_fired_at < $3)`
	qScheduleTrigger = `UPDATE {schema}.schedules SET last_job_id = $3 WHERE tenant = $1 AND name = $2`
	// qScheduleLock locks the schedule only when it is still the definition
	// a scheduler read — the same row (created_at) with the same spec;
	// updated_at is not compared, so a put of the unchanged spec does not
	// make a read stale — and, for a scheduled firing ($4 not NULL), only
	// when the firing is after its mark (ScheduleFire). A delete, replace
	// or another firing holding the row makes it wait; under READ COMMITTED
	// it then rechecks the row's newest version, which may no longer match
	// (or be gone).
	qScheduleLock = `SELECT 1 FROM {schema}.schedules WHERE tenant = $1 AND name = $2 AND created_at = $3 AND spec = $5
AND ($4::timestamptz IS NULL OR last_fired_at IS NULL OR last_fired_at < $4::timestamptz) FOR NO KEY UPDATE`
)

// errFireRefused rolls back a ScheduleFire whose job's insert failed.
var errFireRefused = errors.New("schedule fire: job refused")

// ScheduleUpsert implements store.Schedules.
func (s *Store) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*store.Schedule, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	sc, err := scanSchedule(db.QueryRow(ctx, s.sql(qScheduleUpsert), p.Tenant, p.Name, string(p.Spec), store.OrNow(p.Now)))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// Two first upserts of one name raced; the loser updates.
		sc, err = scanSchedule(db.QueryRow(ctx, s.sql(qScheduleUpsert), p.Tenant, p.Name, string(p.Spec), store.OrNow(p.Now)))
	}
	if err != nil {
		return nil, fmt.Errorf("upsert schedule: %w", err)
	}
	return sc, nil
}

// ScheduleGet implements store.Schedules.
func (s *Store) ScheduleGet(ctx context.Context, p *store.ScheduleGetParams) (*store.Schedule, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	sc, err := scanSchedule(db.QueryRow(ctx, s.sql(qScheduleGet), p.Tenant, p.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("schedule %q: %w", p.Name, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule: %w", err)
	}
	return sc, nil
}

// ScheduleList implements store.Schedules.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, s.sql(qScheduleList), p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out, err := collect(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	if out == nil {
		out = []*store.Schedule{}
	}
	return out, nil
}

// ScheduleDelete implements store.Schedules.
func (s *Store) ScheduleDelete(ctx context.Context, p *store.ScheduleGetParams) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, s.sql(qScheduleDelete), p.Tenant, p.Name)
	if err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete schedule %q: %w", p.Name, idemtype.ErrNotFound)
	}
	return nil
}

// ScheduleFired implements store.Schedules.
func (s *Store) ScheduleFired(ctx context.Context, p *store.ScheduleFiredParams) (bool, error) {
	db, err := s.db()
	if err != nil {
		return false, err
	}
	var tag pgconn.CommandTag
	if p.At.IsZero() {
		tag, err = db.Exec(ctx, s.sql(qScheduleTrigger), p.Tenant, p.Name, p.JobID)
	} else {
		tag, err = db.Exec(ctx, s.sql(qScheduleFired), p.Tenant, p.Name, p.At.UTC().Truncate(time.Microsecond), p.JobID)
	}
	if err != nil {
		return false, fmt.Errorf("schedule fired: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// ScheduleFire implements store.Schedules: the schedule's row lock, the
// job's insert and the mark are one transaction.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) (*store.ScheduleFireResult, error) {
	r := p.Read
	var jobs []*store.JobInsertParams
	if p.Job != nil {
		jobs = []*store.JobInsertParams{p.Job}
	}
	now := store.OrNow(p.Now)
	var out store.ScheduleFireResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = store.ScheduleFireResult{}
		var one int
		var firing *time.Time // nil: a manual trigger, not held by the mark
		if !p.At.IsZero() {
			f := p.At.UTC().Truncate(time.Microsecond)
			firing = &f
		}
		err := tx.QueryRow(ctx, s.sql(qScheduleLock), r.Tenant, r.Name, r.CreatedAt.UTC().Truncate(time.Microsecond),
			firing, string(r.Spec)).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			out.Stale = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock schedule: %w", err)
		}
		var jobID int64
		if len(jobs) > 0 {
			res, err := s.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: jobs, Now: now})
			if err != nil {
				return err
			}
			if out.Insert = res[0]; out.Insert.Err != nil {
				return errFireRefused
			}
			jobID = out.Insert.Job.ID
		}
		var tag pgconn.CommandTag
		switch {
		case p.At.IsZero() && jobID == 0:
			return nil // a check only: no trigger to record
		case p.At.IsZero():
			tag, err = tx.Exec(ctx, s.sql(qScheduleTrigger), r.Tenant, r.Name, jobID)
		default:
			tag, err = tx.Exec(ctx, s.sql(qScheduleFired), r.Tenant, r.Name, p.At.UTC().Truncate(time.Microsecond), jobID)
		}
		if err != nil {
			return fmt.Errorf("mark firing: %w", err)
		}
		out.Changed = tag.RowsAffected() > 0
		return nil
	})
	if err != nil && !errors.Is(err, errFireRefused) {
		return nil, fmt.Errorf("schedule fire: %w", err)
	}
	return &out, nil
}

// scanSchedule scans the columns of scheduleCols.
func scanSchedule(row pgx.Row) (*store.Schedule, error) {
	var s store.Schedule
	var spec string
	var fired *time.Time
	var job *int64
	if err := row.Scan(&s.Tenant, &s.Name, &spec, &s.CreatedAt, &s.UpdatedAt, &fired, &job); err != nil {
		return nil, err
	}
	s.Spec = []byte(spec)
	s.CreatedAt, s.UpdatedAt = utc(s.CreatedAt), utc(s.UpdatedAt)
	s.LastFiredAt = utcP(fired)
	if job != nil {
		s.LastJobID = *job
	}
	return &s, nil
}
