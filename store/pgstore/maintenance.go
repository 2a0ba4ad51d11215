package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobRescue implements store.Maintenance. Unless Config.CallerClock, a
// lease is expired by the database's clock, not by p.Now, so a node whose
// clock runs ahead cannot rescue live leases; p.Now is still the time
// written into the rescued rows. The rescued jobs are returned as the
// rescue's UPDATE left them (qRescue's RETURNING).
func (s *Store) JobRescue(ctx context.Context, p *store.JobRescueParams) ([]store.RescuedJob, error) {
	now := store.OrNow(p.Now)
	limit := store.BatchLimit(p.Limit)
	var out []store.RescuedJob
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.sql(qRescue), now, limit, store.RescuedError, s.expiryClock(now))
		if err != nil {
			return err
		}
		var dead, queues []string
		var deadIDs, ids []int64
		var j store.RescuedJob
		var st string
		_, err = pgx.ForEachRow(rows, []any{&j.ID, &st, &j.Tenant, &j.Queue, &j.Kind, &j.Attempt}, func() error {
			j.State = idemtype.JobState(st)
			out, ids = append(out, j), append(ids, j.ID)
			if j.State == idemtype.StateDead {
				deadIDs = append(deadIDs, j.ID)
				dead = append(dead, j.Queue)
			} else {
				queues = append(queues, j.Queue)
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Cancelled jobs whose handlers never acknowledged the cancel hold
		// their slots and partitions until their leases end: ended now, as a running
		// job's would be (qCancelHoldEnd); they stay cancelled.
		held, err := tx.Query(ctx, s.sql(qCancelHoldEnd), s.expiryClock(now), limit)
		if err != nil {
			return fmt.Errorf("end cancel holds: %w", err)
		}
		ended, freed, err := collectHoldsEnded(held)
		if err != nil {
			return fmt.Errorf("end cancel holds: %w", err)
		}
		queues = append(queues, freed...)
		released, err := s.releaseAfterHolds(ctx, tx, ended, now)
		if err != nil {
			return err
		}
		queues = append(queues, released...)
		if len(ids) > 0 {
			released, err := s.afterFinal(ctx, tx, deadIDs, ids, now)
			if err != nil {
				return err
			}
			queues = append(queues, released...)
		}
		return s.notify(ctx, tx, queues)
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	return out, nil
}

// JobReleaseMany implements store.Maintenance.
func (s *Store) JobReleaseMany(ctx context.Context, params *store.JobReleaseManyParams) (int, error) {
	leases, now := params.Leases, params.Now
	now = store.OrNow(now)
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if params.ClaimToken != "" {
			// Wait for a claim transaction of the token still running
			// (one whose call was cut off): the release's snapshot, taken
			// after this, sees its commit; and mark the token given back,
			// so that a claim transaction of it yet to start claims
			// nothing (claim_token_lock.go).
			if _, err := tx.Exec(ctx, s.sql(qClaimTokenWait), s.claimLockClass(), params.ClaimToken); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.sql(qClaimGivenBack), params.ClaimToken, now); err != nil {
				return err
			}
		}
		ids, tokens := splitLeases(leases)
		rows, err := tx.Query(ctx, s.sql(qRelease), ids, tokens, now, params.ClaimToken)
		if err != nil {
			return err
		}
		var released []int64
		var queues []string
		var id int64
		var q string
		_, err = pgx.ForEachRow(rows, []any{&id, &q}, func() error {
			released, queues = append(released, id), append(queues, q)
			return nil
		})
		if err != nil || len(released) == 0 {
			return err
		}
		n = len(released)
		if _, err := tx.Exec(ctx, s.sql(qSettleRecords), released); err != nil {
			return err
		}
		return s.notify(ctx, tx, queues)
	})
	if err != nil {
		return 0, fmt.Errorf("release jobs: %w", err)
	}
	return n, nil
}

// JobPromote implements store.Maintenance.
func (s *Store) JobPromote(ctx context.Context, params *store.JobPromoteParams) ([]string, error) {
	now, limit := params.Now, params.Limit
	limit = store.BatchLimit(limit)
	var out []string
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.sql(qPromote), store.OrNow(now), limit)
		if err != nil {
			return err
		}
		qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, q := range qs {
			if !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
		return s.notify(ctx, tx, out)
	})
	if err != nil {
		return nil, fmt.Errorf("promote jobs: %w", err)
	}
	return out, nil
}

// JobDeleteFinished implements store.Maintenance.
func (s *Store) JobDeleteFinished(ctx context.Context, p *store.JobDeleteFinishedParams) (int, error) {
	db, err := s.db()
	if err != nil {
		return 0, err
	}
	limit := store.BatchLimit(p.Limit)
	tag, err := db.Exec(ctx, s.sql(qDeleteFinished), nullTime(p.CompletedBefore), nullTime(p.CancelledBefore),
		nullTime(p.DeadBefore), store.OrNow(p.Now), limit, s.expiryClock(store.OrNow(p.Now)))
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	// The leader's retention run also forgets the flow_known rows of
	// stores that crashed (a day old): Open does it only when it
	// migrates, and nodes started without migrating never would.
	if _, err := db.Exec(ctx, s.sql(qKnownStale)); err != nil {
		return 0, fmt.Errorf("forget stale known tenants: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// RecordDeleteExpired implements store.Maintenance.
func (s *Store) RecordDeleteExpired(ctx context.Context, params *store.RecordDeleteExpiredParams) (int, error) {
	now, limit := params.Now, params.Limit
	db, err := s.db()
	if err != nil {
		return 0, err
	}
	limit = store.BatchLimit(limit)
	tag, err := db.Exec(ctx, s.sql(qDeleteExpiredRecords), store.OrNow(now), limit, s.expiryClock(now))
	if err != nil {
		return 0, fmt.Errorf("delete expired records: %w", err)
	}
	dropped, err := db.Exec(ctx, s.sql(qDropExpiredResults), store.OrNow(now), limit, s.expiryClock(now))
	if err != nil {
		return 0, fmt.Errorf("drop expired results: %w", err)
	}
	return int(tag.RowsAffected() + dropped.RowsAffected()), nil
}
