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

// DefaultMaintenanceLimit is the batch size of maintenance calls given a
// limit <= 0.
const DefaultMaintenanceLimit = 1000

func limitOr(n int) int {
	if n <= 0 {
		return DefaultMaintenanceLimit
	}
	return n
}

// leaseLostError is the LastError of a rescued job.
const leaseLostError = "lease expired: the worker stopped heartbeating (lost)"

// JobRescue implements store.Maintenance.
func (s *Store) JobRescue(ctx context.Context, p *store.JobRescueParams) ([]int64, error) {
	now := store.OrNow(p.Now)
	nowUS := toUS(now)
	limit := limitOr(p.Limit)
	var out []int64
	err := s.write(ctx, limit, func(t *wtx) error {
		out = out[:0]
		ids, err := selectIDs(t, qRescueSelect, nowUS, limit)
		if err != nil {
			return err
		}
		for _, id := range ids {
			// The lost attempt's row, from the job row before it changes.
			if _, err := t.exec(qAttemptEndNow, nowUS, leaseLostError, id, string(idemtype.OutcomeLost), ""); err != nil {
				return err
			}
			var state, tenant, key string
			var dedup, ttl int64
			err := t.queryRow(qRescue, nowUS, leaseLostError, id).Scan(&state, &tenant, &key, &dedup, &ttl)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if idemtype.JobState(state) == idemtype.StateDead {
				if err := cancelDependants(t, id, idemtype.StateDead, nowUS); err != nil {
					return err
				}
				if err := onFinal(t, tenant, key, id, dedup, ttl, now); err != nil {
					return err
				}
			}
			if key != "" {
				if _, err := t.exec(qKeyLeaseRelease, tenant, key, store.JobOwner(id)); err != nil {
					return err
				}
			}
			out = append(out, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
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
func (s *Store) JobReleaseMany(ctx context.Context, leases []store.Lease, now time.Time) (int, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	nowUS := toUS(store.OrNow(now))
	var n int
	err := s.write(ctx, len(leases), func(t *wtx) error {
		n = 0
		for _, l := range leases {
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
func (s *Store) JobPromote(ctx context.Context, now time.Time, limit int) ([]string, error) {
	nowUS := toUS(store.OrNow(now))
	limit = limitOr(limit)
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
	limit := limitOr(p.Limit)
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
func (s *Store) RecordDeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	nowUS := toUS(store.OrNow(now))
	limit = limitOr(limit)
	var n int64
	err := s.write(ctx, limit, func(t *wtx) error {
		res, err := t.exec(qRecordDeleteExpired, nowUS, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired records: %w", err)
	}
	return int(n), nil
}

// LeaderAttempt implements store.Leader.
func (s *Store) LeaderAttempt(ctx context.Context, p *store.LeaderParams) (bool, error) {
	now := store.OrNow(p.Now)
	var leads bool
	err := s.write(ctx, 1, func(t *wtx) error {
		var owner string
		err := t.queryRow(qLeaderAttempt, p.Name, p.Owner, toUS(now.Add(p.TTL)), toUS(now)).Scan(&owner)
		if errors.Is(err, sql.ErrNoRows) {
			leads = false
			return nil
		}
		leads = err == nil && owner == p.Owner
		return err
	})
	if err != nil {
		return false, fmt.Errorf("leader attempt: %w", err)
	}
	return leads, nil
}

// LeaderResign implements store.Leader.
func (s *Store) LeaderResign(ctx context.Context, name, owner string) error {
	err := s.write(ctx, 1, func(t *wtx) error {
		_, err := t.exec(qLeaderResign, name, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("leader resign: %w", err)
	}
	return nil
}

// APIKeyCreate implements store.APIKeys.
func (s *Store) APIKeyCreate(ctx context.Context, k *store.APIKey) error {
	if k.ID == "" {
		return fmt.Errorf("create api key: %w", idemtype.Invalid("id", "empty"))
	}
	created := store.OrNow(k.CreatedAt)
	var revoked any
	if k.RevokedAt != nil {
		revoked = toUS(*k.RevokedAt)
	}
	err := s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(qAPIKeyCreate, k.ID, k.Hash, k.Tenant, boolInt(k.Admin), k.Name, toUS(created), revoked)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return idemtype.Invalid("id", "api key %q already exists", k.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
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

// APIKeyByHash implements store.APIKeys.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	k, err := scanAPIKey(s.readRow(ctx, qAPIKeyByHash, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("api key: %w", idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("api key: %w", s.readErr(err))
	}
	return k, nil
}

// APIKeyList implements store.APIKeys.
func (s *Store) APIKeyList(ctx context.Context) ([]*store.APIKey, error) {
	rows, err := s.rdb.QueryContext(ctx, qAPIKeyList)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*store.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// APIKeyRevoke implements store.APIKeys.
func (s *Store) APIKeyRevoke(ctx context.Context, id string, now time.Time) error {
	nowUS := toUS(store.OrNow(now))
	err := s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(qAPIKeyRevoke, nowUS, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("api key %q: %w", id, idemtype.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	return nil
}
