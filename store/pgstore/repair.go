package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/store"
)

// JobDependantsRepair implements store.Maintenance.
//
// Cost: one call reads at most Limit entries of the partial index
// jobs_pending_idx (pending jobs only, by created_at) from the cursor on,
// and for each its dependencies by primary key; nothing else is read when
// nothing is to repair. Jobs pending longer than the grace are examined
// once per walk of the pending jobs, the walk moving on by Limit jobs a
// call (the cursor), so a long-waiting pending job is not read again on
// every call.
//
// The candidates are read without locks; only those whose dependencies
// are settled (to repair) are locked, so a call writes nothing when there
// is nothing to repair.
//
// Races: those are locked (FOR UPDATE SKIP LOCKED: one a finish locked is
// left to that finish, which locks the pending dependants of every job it
// finishes in its first statement), and the release and the cancel are
// conditional updates of pending jobs whose statements see the
// dependencies' committed states once the jobs are locked, as a finish's
// release does (qLockDependants, then qReleaseDependants): a job is
// released or cancelled once, never both, and never while a dependency is
// unfinished or holds.
func (s *Store) JobDependantsRepair(ctx context.Context, p *store.JobDependantsRepairParams) (*store.JobDependantsRepairResult, error) {
	now := store.OrNow(p.Now)
	before := p.CreatedBefore
	if before.IsZero() {
		before = now
	}
	limit := store.BatchLimit(p.Limit)
	var out store.JobDependantsRepairResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = store.JobDependantsRepairResult{}
		rows, err := tx.Query(ctx, s.sql(qRepairCandidates), before, p.After.CreatedAt, p.After.ID, limit)
		if err != nil {
			return fmt.Errorf("find pending jobs: %w", err)
		}
		var settled []int64
		var n int
		var last store.DependantsCursor
		var ok bool
		_, err = pgx.ForEachRow(rows, []any{&last.ID, &last.CreatedAt, &ok}, func() error {
			n++
			if ok {
				settled = append(settled, last.ID)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("find pending jobs: %w", err)
		}
		if n == limit {
			out.Next = store.DependantsCursor{CreatedAt: last.CreatedAt.UTC(), ID: last.ID}
		}
		if len(settled) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, s.sql(qRepairLock), settled)
		if err != nil {
			return fmt.Errorf("lock pending jobs: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			if err != nil {
				err = fmt.Errorf("lock pending jobs: %w", err)
			}
			return err
		}
		released, queues, err := s.releaseLocked(ctx, tx, ids, now)
		if err != nil {
			return err
		}
		out.Released = released
		cancelled, qs, err := s.repairCancel(ctx, tx, ids, now)
		if err != nil {
			return err
		}
		out.Cancelled = cancelled
		return s.notify(ctx, tx, append(queues, qs...))
	})
	if err != nil {
		return nil, fmt.Errorf("repair pending dependants: %w", err)
	}
	return &out, nil
}

// repairCancel cancels the locked pending jobs of ids that need their
// dependencies to complete and have a dead or cancelled one
// (qRepairCancel), with what a cancel does for each (afterFinal): its
// record settled, its own pending dependants cancelled or released. It
// returns every job it cancelled and the queues that got available jobs.
func (s *Store) repairCancel(ctx context.Context, tx pgx.Tx, ids []int64, now time.Time) ([]int64, []string, error) {
	rows, err := tx.Query(ctx, s.sql(qRepairCancel), ids, now)
	if err != nil {
		return nil, nil, fmt.Errorf("cancel pending jobs: %w", err)
	}
	cancelled, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, fmt.Errorf("cancel pending jobs: %w", err)
	}
	if len(cancelled) == 0 {
		return nil, nil, nil
	}
	more, queues, err := s.afterFinalCancelled(ctx, tx, cancelled, slices.Clip(cancelled), now)
	if err != nil {
		return nil, nil, err
	}
	return append(cancelled, more...), queues, nil
}
