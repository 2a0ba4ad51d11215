package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobRescue implements store.Maintenance. The rescued jobs are returned
// as qRescue left them (its RETURNING, in the write transaction).
func (s *Store) JobRescue(ctx context.Context, p *store.JobRescueParams) ([]store.RescuedJob, error) {
	now := store.OrNow(p.Now)
	nowUS := toUS(now)
	limit := store.BatchLimit(p.Limit)
	var out []store.RescuedJob
	var freed []string
	err := s.write(ctx, limit, func(t *wtx) error {
		out = out[:0]
		t.released = nil
		ids, err := selectIDs(t, qRescueSelect, nowUS, limit)
		if err != nil {
			return err
		}
		for _, id := range ids {
			// The lost attempt's row, from the job row before it changes.
			if _, err := t.exec(qAttemptEndNow, nowUS, store.RescuedError, id, string(idemtype.OutcomeLost), ""); err != nil {
				return err
			}
			j := store.RescuedJob{ID: id}
			var state, key string
			var dedup, ttl int64
			err := t.queryRow(qRescue, nowUS, store.RescuedError, id).Scan(&state, &j.Tenant, &j.Queue, &j.Kind,
				&j.Attempt, &key, &dedup, &ttl)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			j.State = idemtype.JobState(state)
			if j.State == idemtype.StateDead {
				if _, err := cancelDependants(t, id, idemtype.StateDead, nowUS); err != nil {
					return err
				}
				if err := onFinal(t, j.Tenant, key, id, dedup, ttl, now); err != nil {
					return err
				}
			}
			if key != "" {
				if _, err := t.exec(qKeyLeaseRelease, j.Tenant, key, store.JobOwner(id)); err != nil {
					return err
				}
			}
			out = append(out, j)
		}
		// Cancelled jobs whose handlers never acknowledged the cancel hold
		// their slots and partitions until their leases end: ended now, as a running
		// job's would be (qCancelHoldEnd); they stay cancelled.
		// Their dependants that wait for any outcome are released then.
		// Their queues, and those of the dependants made available, are
		// announced once committed (no NOTIFY here).
		freed = freed[:0]
		rows, err := t.query(qCancelHoldEnd, nowUS, limit)
		if err != nil {
			return fmt.Errorf("end cancel holds: %w", err)
		}
		var ended []int64
		for rows.Next() {
			var id int64
			var q string
			if err := rows.Scan(&id, &q); err != nil {
				rows.Close()
				return fmt.Errorf("end cancel holds: %w", err)
			}
			ended = append(ended, id)
			freed = append(freed, q)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("end cancel holds: %w", err)
		}
		for _, id := range ended {
			if err := releaseDependants(t, id, nowUS, true); err != nil {
				return err
			}
		}
		// And the queues of the dependants released: of jobs rescued to
		// dead (cancelDependants) and of the holds ended.
		freed = append(freed, t.takeReleased()...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	s.announce(freed)
	return out, nil
}

func selectIDs(t *wtx, q string, args ...any) ([]int64, error) {
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// JobReleaseMany implements store.Maintenance.
func (s *Store) JobReleaseMany(ctx context.Context, params *store.JobReleaseManyParams) (int, error) {
	leases, now := params.Leases, params.Now
	if len(leases) == 0 && params.ClaimToken == "" {
		return 0, nil
	}
	nowUS := toUS(store.OrNow(now))
	var n int
	err := s.write(ctx, len(leases)+1, func(t *wtx) error {
		n = 0
		all := leases
		if params.ClaimToken != "" {
			claimed, err := runningUnder(t, params.ClaimToken)
			if err != nil {
				return err
			}
			all = append(claimed, leases...)
		}
		for _, l := range all {
			if l.Token == "" {
				continue // no claim has an empty token
			}
			// The released attempt's row, from the job row before qRelease
			// clears the worker and gives the attempt back.
			if _, err := t.exec(qAttemptEndNow, nowUS, "", l.ID, string(idemtype.OutcomeReleased), l.Token); err != nil {
				return err
			}
			var tenant, key string
			err := t.queryRow(qRelease, nowUS, l.ID, l.Token).Scan(&tenant, &key)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if key != "" {
				if _, err := t.exec(qKeyLeaseRelease, tenant, key, store.JobOwner(l.ID)); err != nil {
					return err
				}
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("release jobs: %w", err)
	}
	return n, nil
}

// JobPromote implements store.Maintenance.
func (s *Store) JobPromote(ctx context.Context, params *store.JobPromoteParams) ([]string, error) {
	now, limit := params.Now, params.Limit
	nowUS := toUS(store.OrNow(now))
	limit = store.BatchLimit(limit)
	var queues []string
	err := s.write(ctx, limit, func(t *wtx) error {
		queues = queues[:0]
		rows, err := t.query(qPromote, nowUS, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		seen := map[string]bool{}
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				return err
			}
			if !seen[q] {
				seen[q] = true
				queues = append(queues, q)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("promote jobs: %w", err)
	}
	return queues, nil
}

// JobDeleteFinished implements store.Maintenance.
func (s *Store) JobDeleteFinished(ctx context.Context, p *store.JobDeleteFinishedParams) (int, error) {
	before := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return toUS(t)
	}
	nowUS := toUS(store.OrNow(p.Now))
	limit := store.BatchLimit(p.Limit)
	var n int
	err := s.write(ctx, limit, func(t *wtx) error {
		n = 0
		ids, err := selectIDs(t, qRetentionSelect, before(p.CompletedBefore), before(p.CancelledBefore),
			before(p.DeadBefore), nowUS, limit)
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			if err := raiseSeq(t, slices.Max(ids)); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if _, err := t.exec(qJobDeleteByID, id); err != nil {
				return err
			}
			if err := deleteJobChildren(t, id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return n, nil
}

// RecordDeleteExpired implements store.Maintenance.
func (s *Store) RecordDeleteExpired(ctx context.Context, params *store.RecordDeleteExpiredParams) (int, error) {
	now, limit := params.Now, params.Limit
	nowUS := toUS(store.OrNow(now))
	limit = store.BatchLimit(limit)
	var n int64
	err := s.write(ctx, limit, func(t *wtx) error {
		for _, q := range []string{qRecordDeleteExpired, qRecordDropResults} {
			res, err := t.exec(q, nowUS, limit)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired records: %w", err)
	}
	return int(n), nil
}

func scanAPIKey(sc scanner) (*store.APIKey, error) {
	var k store.APIKey
	var admin int
	var created int64
	var revoked sql.NullInt64
	if err := sc.Scan(&k.ID, &k.Hash, &k.Tenant, &admin, &k.Name, &created, &revoked); err != nil {
		return nil, err
	}
	k.Admin = admin != 0
	k.CreatedAt = fromUS(created)
	k.RevokedAt = ptrUS(revoked)
	return &k, nil
}

// runningUnder returns the leases of the jobs running under lease token
// token (a claim's, JobReleaseManyParams.ClaimToken), read through the
// running jobs' index.
func runningUnder(t *wtx, token string) ([]store.Lease, error) {
	rows, err := t.query(qRunningUnder, token)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Lease
	for rows.Next() {
		l := store.Lease{Token: token}
		if err := rows.Scan(&l.ID); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
