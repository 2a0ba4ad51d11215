package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// finishedJob is a job a finish statement moved on.
type finishedJob struct {
	state idemtype.JobState
	queue string
	runAt time.Time
	keyed bool // the job has an idempotency key
}

// JobCancel implements store.Jobs.
func (s *Store) JobCancel(ctx context.Context, p *store.JobCancelParams) (*idemtype.JobRow, error) {
	now := store.OrNow(p.Now)
	var out *idemtype.JobRow
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var tenant, state, token string
		err := tx.QueryRow(ctx, s.sql(qJobLock), p.ID).Scan(&tenant, &state, &token)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && p.Tenant != "" && tenant != p.Tenant) {
			return fmt.Errorf("job %d: %w", p.ID, idemtype.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if idemtype.JobState(state).Finished() {
			return fmt.Errorf("job %d is %s: %w", p.ID, state, idemtype.ErrWrongState)
		}
		if state == string(idemtype.StateRunning) {
			if _, err := tx.Exec(ctx, s.sql(qAttemptCancel), p.ID, now, p.Reason); err != nil {
				return err
			}
		}
		if out, err = scanJob(tx.QueryRow(ctx, s.sql(qJobCancel), p.ID, now, p.Reason)); err != nil {
			return err
		}
		if state == string(idemtype.StateRunning) && token != "" {
			if p.Voided != nil {
				*p.Voided = store.Lease{ID: p.ID, Token: token}
			}
			// Tells the process running the handler (any process) at
			// once, before the queues: a listener cancels the handler
			// before it wakes a producer (store.Listener).
			notice := store.CancelNotice(store.Lease{ID: p.ID, Token: token})
			if _, err := tx.Exec(ctx, qNotifyOne, s.schema, notice); err != nil {
				return fmt.Errorf("notify cancel: %w", err)
			}
		}
		queues, err := s.afterFinal(ctx, tx, []int64{p.ID}, []int64{p.ID}, now)
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, queues)
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job: %w", err)
	}
	return out, nil
}

// JobRetryMany implements store.Jobs.
func (s *Store) JobRetryMany(ctx context.Context, p *store.JobRetryManyParams) ([]*idemtype.JobRow, error) {
	now := store.OrNow(p.Now)
	runAt := now
	if !p.RunAt.IsZero() {
		runAt = p.RunAt.UTC()
	}
	from := make([]string, 0, len(p.FromStates))
	for _, st := range p.FromStates {
		if st == idemtype.StateDead || st == idemtype.StateCancelled {
			from = append(from, string(st))
		}
	}
	if len(p.FromStates) == 0 {
		from = []string{string(idemtype.StateDead), string(idemtype.StateCancelled)}
	}
	var out []*idemtype.JobRow
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var rows pgx.Rows
		var err error
		if len(p.IDs) > 0 {
			limit := p.Limit
			if limit <= 0 {
				limit = len(p.IDs)
			}
			rows, err = tx.Query(ctx, s.sql(qRetrySelectIDs), p.IDs, p.Filter.Tenant, from, limit)
		} else {
			limit := store.BatchLimit(p.Limit)
			f := p.Filter
			f.States = nil
			where, args := jobFilterSQL(&f, 3)
			rows, err = tx.Query(ctx, s.sql(qRetrySelectFilter(where)), append([]any{from, limit}, args...)...)
		}
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql(qRetryLockDeps), ids); err != nil {
			return err
		}
		if ids, err = s.retryRefused(ctx, tx, ids, len(p.IDs) > 0); err != nil || len(ids) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql(qRetryLockPartitions), ids); err != nil {
			return err
		}
		levels, err := s.retryLevels(ctx, tx, ids)
		if err != nil {
			return err
		}
		for _, lv := range levels {
			rows, err := collectJobsQuery(ctx, tx, s.sql(qRetry), lv, runAt, now)
			if err != nil {
				return err
			}
			out = append(out, rows...)
		}
		if len(levels) > 1 {
			slices.SortFunc(out, func(a, b *idemtype.JobRow) int { return cmp.Compare(a.ID, b.ID) })
		}
		if _, err := tx.Exec(ctx, s.sql(qRetryReopenRecords), ids, now); err != nil {
			return fmt.Errorf("reopen keys: %w", err)
		}
		var queues []string
		for _, j := range out {
			if j.State == idemtype.StateAvailable {
				queues = append(queues, j.Queue)
			}
		}
		return s.notify(ctx, tx, queues)
	})
	if err != nil {
		return nil, fmt.Errorf("retry jobs: %w", err)
	}
	return out, nil
}

// retryLevels splits the jobs ids of a retry into levels that qRetry
// reopens one after the other: a job comes after every dependency of it
// that is retried too, so that its state is decided from the state that
// dependency is retried into (pending on it, not cancelled again by its
// dead state before the call), as SQLite, which reopens jobs one by one
// in id order, decides it. Usually there is one level: ids.
func (s *Store) retryLevels(ctx context.Context, tx pgx.Tx, ids []int64) ([][]int64, error) {
	rows, err := tx.Query(ctx, s.sql(qRetryDepsInSet), ids)
	if err != nil {
		return nil, fmt.Errorf("read dependencies: %w", err)
	}
	deps := map[int64][]int64{}
	var id int64
	var on []int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &on}, func() error {
		deps[id] = append([]int64(nil), on...)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read dependencies: %w", err)
	}
	if len(deps) == 0 {
		return [][]int64{ids}, nil
	}
	level := make(map[int64]int, len(ids))
	var levelOf func(id int64) int
	levelOf = func(id int64) int {
		if l, ok := level[id]; ok {
			return l
		}
		level[id] = 0 // a dependency is older than its dependant: no cycle
		l := 0
		for _, d := range deps[id] {
			l = max(l, levelOf(d)+1)
		}
		level[id] = l
		return l
	}
	var out [][]int64
	for _, id := range ids {
		l := levelOf(id)
		for len(out) <= l {
			out = append(out, nil)
		}
		out[l] = append(out[l], id)
	}
	return out, nil
}

// retryRefused applies the rule of store.RetryRefusal to the jobs ids of
// a retry, their dependencies locked: by ids (byIDs) any refused job is a
// *store.RetryRefusedError; by filter (whose selection skipped them) a job
// refused since — its dependency deleted in between — is dropped. It
// returns the ids to retry.
func (s *Store) retryRefused(ctx context.Context, tx pgx.Tx, ids []int64, byIDs bool) ([]int64, error) {
	rows, err := tx.Query(ctx, s.sql(qRetryRefused), ids)
	if err != nil {
		return nil, fmt.Errorf("check dependencies: %w", err)
	}
	refused, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.RetryRefusal, error) {
		var x store.RetryRefusal
		err := r.Scan(&x.ID, &x.Dependency)
		return &x, err
	})
	if err != nil {
		return nil, fmt.Errorf("check dependencies: %w", err)
	}
	if len(refused) == 0 {
		return ids, nil
	}
	if byIDs {
		return nil, &store.RetryRefusedError{Refused: refused}
	}
	skip := make(map[int64]bool, len(refused))
	for _, r := range refused {
		skip[r.ID] = true
	}
	kept := ids[:0:0]
	for _, id := range ids {
		if !skip[id] {
			kept = append(kept, id)
		}
	}
	return kept, nil
}

// collectJobsQuery runs a query returning job rows.
func collectJobsQuery(ctx context.Context, q querier, sql string, args ...any) ([]*idemtype.JobRow, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return collectJobs(rows)
}

// JobDelete implements store.Jobs.
func (s *Store) JobDelete(ctx context.Context, params *store.JobDeleteParams) error {
	tenant, id, state := params.Tenant, params.ID, params.State
	db, err := s.db()
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, s.sql(qJobDelete), id, string(state), tenant)
	if err != nil {
		return fmt.Errorf("delete job %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete job %d in state %s: %w", id, state, idemtype.ErrNotFound)
	}
	return nil
}
