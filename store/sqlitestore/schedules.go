package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The queries of the schedules table.
const (
	scheduleCols    = `tenant, name, spec, created_at, updated_at, last_fired_at, last_job_id`
	qScheduleUpsert = `INSERT INTO schedules (tenant, name, spec, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (tenant, name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at
RETURNING ` + scheduleCols
	qScheduleGet     = `SELECT ` + scheduleCols + ` FROM schedules WHERE tenant = ? AND name = ?`
	qScheduleList    = `SELECT ` + scheduleCols + ` FROM schedules WHERE ? = '' OR tenant = ? ORDER BY tenant, name`
	qScheduleDelete  = `DELETE FROM schedules WHERE tenant = ? AND name = ?`
	qScheduleFired   = `UPDATE schedules SET last_fired_at = ?, last_job_id = COALESCE(NULLIF(?, 0), last_job_id) WHERE tenant = ? AND name = ? AND (last_fired_at IS NULL OR last_fired_at < ?)`
	qScheduleTrigger = `UPDATE schedules SET last_job_id = ? WHERE tenant = ? AND name = ?`
	// qScheduleCurrent finds the schedule only when it is still the
	// definition a scheduler read — the same row (created_at) with the same
	// spec; updated_at is not compared, so a put of the unchanged spec does
	// not make a read stale — and, for a scheduled firing (?4 not NULL),
	// only when the firing is after its mark (ScheduleFire).
	qScheduleCurrent = `SELECT 1 FROM schedules WHERE tenant = ?1 AND name = ?2 AND created_at = ?3 AND spec = ?5
AND (?4 IS NULL OR last_fired_at IS NULL OR last_fired_at < ?4)`
)

// ScheduleUpsert implements store.Schedules.
func (s *Store) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*store.Schedule, error) {
	now := toUS(store.OrNow(p.Now))
	var out *store.Schedule
	err := s.write(ctx, 1, func(t *wtx) error {
		sc, err := scanSchedule(t.queryRow(qScheduleUpsert, p.Tenant, p.Name, string(p.Spec), now, now))
		out = sc
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("upsert schedule: %w", err)
	}
	return out, nil
}

// ScheduleGet implements store.Schedules.
func (s *Store) ScheduleGet(ctx context.Context, p *store.ScheduleGetParams) (*store.Schedule, error) {
	sc, err := scanSchedule(s.readRow(ctx, qScheduleGet, p.Tenant, p.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("schedule %q: %w", p.Name, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule: %w", s.readErr(err))
	}
	return sc, nil
}

// ScheduleList implements store.Schedules.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	rows, err := s.readRows(ctx, qScheduleList, p.Tenant, p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", s.readErr(err))
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
	err := s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(qScheduleDelete, p.Tenant, p.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("schedule %q: %w", p.Name, idemtype.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	return nil
}

// ScheduleFired implements store.Schedules.
func (s *Store) ScheduleFired(ctx context.Context, p *store.ScheduleFiredParams) (bool, error) {
	var changed bool
	err := s.write(ctx, 1, func(t *wtx) error {
		var res sql.Result
		var err error
		if p.At.IsZero() {
			res, err = t.exec(qScheduleTrigger, p.JobID, p.Tenant, p.Name)
		} else {
			at := toUS(p.At)
			res, err = t.exec(qScheduleFired, at, p.JobID, p.Tenant, p.Name, at)
		}
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		changed = n > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("schedule fired: %w", err)
	}
	return changed, nil
}

// ScheduleFire implements store.Schedules. It runs on the single writer, so
// no delete or replace of the schedule can come between its check, the
// job's insert and the mark.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) (*store.ScheduleFireResult, error) {
	r := p.Read
	var jobs []*store.JobInsertParams
	if p.Job != nil {
		jobs = []*store.JobInsertParams{p.Job}
		if err := store.CheckInsertTenants(jobs); err != nil {
			return nil, fmt.Errorf("schedule fire: %w", err)
		}
	}
	now := truncUS(store.OrNow(p.Now))
	var out store.ScheduleFireResult
	err := s.write(ctx, 1+len(jobs), func(t *wtx) error {
		out = store.ScheduleFireResult{}
		var one int
		var firing any // nil: a manual trigger, not held by the mark
		if !p.At.IsZero() {
			firing = toUS(p.At)
		}
		err := t.queryRow(qScheduleCurrent, r.Tenant, r.Name, toUS(r.CreatedAt), firing, string(r.Spec)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			out.Stale = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("check schedule: %w", err)
		}
		var jobID int64
		if len(jobs) > 0 {
			res, err := insertJobs(t, jobs, now)
			if err != nil {
				return err
			}
			// A failed item was refused before anything was written.
			if out.Insert = res[0]; out.Insert.Err != nil {
				return nil
			}
			jobID = out.Insert.Job.ID
		}
		var res sql.Result
		switch {
		case p.At.IsZero() && jobID == 0:
			return nil // a check only: no trigger to record
		case p.At.IsZero():
			res, err = t.exec(qScheduleTrigger, jobID, r.Tenant, r.Name)
		default:
			at := toUS(p.At)
			res, err = t.exec(qScheduleFired, at, jobID, r.Tenant, r.Name, at)
		}
		if err != nil {
			return fmt.Errorf("mark firing: %w", err)
		}
		n, _ := res.RowsAffected()
		out.Changed = n > 0
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("schedule fire: %w", err)
	}
	if out.Insert.Job != nil {
		s.noteKeys(jobs)
	}
	return &out, nil
}

// scanSchedule scans the columns of scheduleCols.
func scanSchedule(sc scanner) (*store.Schedule, error) {
	var s store.Schedule
	var spec string
	var created, updated int64
	var fired, job sql.NullInt64
	if err := sc.Scan(&s.Tenant, &s.Name, &spec, &created, &updated, &fired, &job); err != nil {
		return nil, err
	}
	s.Spec = []byte(spec)
	s.CreatedAt, s.UpdatedAt = fromUS(created), fromUS(updated)
	s.LastFiredAt = ptrUS(fired)
	s.LastJobID = job.Int64
	return &s, nil
}
