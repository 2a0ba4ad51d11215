package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobCancel implements store.Jobs.
func (s *Store) JobCancel(ctx context.Context, p *store.JobCancelParams) (*idemtype.JobRow, error) {
	now := truncUS(store.OrNow(p.Now))
	var out *idemtype.JobRow
	var released []string
	err := s.write(ctx, 1, func(t *wtx) error {
		t.released = nil
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
		if j.State == idemtype.StateRunning && p.Voided != nil {
			*p.Voided = store.Lease{ID: p.ID, Token: j.LeaseToken}
		}
		if _, err := cancelDependants(t, p.ID, idemtype.StateCancelled, nowUS); err != nil {
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
		// Its dependants that wait for any outcome, released: their
		// queues are announced once committed.
		released = t.takeReleased()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job: %w", err)
	}
	s.announce(released)
	return out, nil
}

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
	sb.WriteString("SELECT id, " + sqlRetryMissingDep + " FROM jobs WHERE state IN (" + placeholders(len(okFrom)) + ")")
	for _, st := range okFrom {
		args = append(args, string(st))
	}
	limit := p.Limit
	if len(p.IDs) > 0 {
		// One parameter whatever the number of ids (SQLite caps the
		// parameters of a statement).
		sb.WriteString(" AND id IN (SELECT value FROM json_each(?))")
		args = append(args, jsonIDs(p.IDs))
		if p.Filter.Tenant != "" {
			sb.WriteString(" AND tenant = ?")
			args = append(args, p.Filter.Tenant)
		}
	} else {
		f := p.Filter
		f.States = nil
		args = filterSQL(&sb, args, &f)
		// Refused jobs are skipped and do not take up the limit.
		sb.WriteString(" AND " + sqlRetryMissingDep + " IS NULL")
		if limit <= 0 {
			limit = store.MaxBatch
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
		var refused []*store.RetryRefusal
		for rows.Next() {
			var id int64
			var missing sql.NullInt64
			if err := rows.Scan(&id, &missing); err != nil {
				rows.Close()
				return err
			}
			if missing.Valid {
				refused = append(refused, &store.RetryRefusal{ID: id, Dependency: missing.Int64})
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(refused) > 0 {
			return &store.RetryRefusedError{Refused: refused}
		}
		for _, id := range ids {
			j, err := scanJob(t.queryRow(qJobRetry, toUS(runAt), toUS(now), id))
			if err != nil {
				return err
			}
			if j.IdempotencyKey != "" && !j.State.Finished() {
				if _, err := t.exec(qKeyRetryReopen, j.Tenant, j.IdempotencyKey, id, toUS(now)); err != nil {
					return fmt.Errorf("reopen key of job %d: %w", id, err)
				}
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
func (s *Store) JobDelete(ctx context.Context, params *store.JobDeleteParams) error {
	tenant, id, state := params.Tenant, params.ID, params.State
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
