package sqlitestore

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobDependantsRepair implements store.Maintenance.
//
// Cost: one call reads at most Limit entries of the partial index
// jobs_pending (pending jobs only, by creation time), from the cursor on,
// and for each its dependencies through job_deps by primary key; nothing
// else is read when nothing is to repair. Jobs pending longer than the
// grace are examined once per walk of the pending jobs, the walk moving on
// by Limit jobs a call (the cursor), so a long-waiting pending job is not
// read again on every call.
func (s *Store) JobDependantsRepair(ctx context.Context, p *store.JobDependantsRepairParams) (*store.JobDependantsRepairResult, error) {
	now := store.OrNow(p.Now)
	nowUS := toUS(now)
	before := p.CreatedBefore
	if before.IsZero() {
		before = now
	}
	limit := store.BatchLimit(p.Limit)
	var afterUS int64
	if !p.After.CreatedAt.IsZero() {
		afterUS = toUS(p.After.CreatedAt)
	}
	var out store.JobDependantsRepairResult
	var queues []string
	err := s.write(ctx, limit, func(t *wtx) error {
		out, queues = store.JobDependantsRepairResult{}, queues[:0]
		t.released = nil
		rows, err := t.query(qRepairCandidates, toUS(before), afterUS, p.After.ID, limit)
		if err != nil {
			return fmt.Errorf("find pending jobs: %w", err)
		}
		var ids []int64
		var last store.DependantsCursor
		for rows.Next() {
			var createdUS int64
			if err := rows.Scan(&last.ID, &createdUS); err != nil {
				rows.Close()
				return fmt.Errorf("find pending jobs: %w", err)
			}
			last.CreatedAt = fromUS(createdUS)
			ids = append(ids, last.ID)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find pending jobs: %w", err)
		}
		if len(ids) == limit {
			out.Next = last
		}
		if len(ids) == 0 {
			return nil
		}
		list := jsonIDs(ids)
		if out.Released, queues, err = repairRelease(t, nowUS, list); err != nil {
			return err
		}
		out.Cancelled, err = repairCancel(t, nowUS, list)
		queues = append(queues, t.takeReleased()...) // released by those cancels
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("repair pending dependants: %w", err)
	}
	s.announce(queues)
	return &out, nil
}

// repairRelease releases the pending jobs of the JSON id list whose
// dependencies are satisfied (qRepairRelease); it returns their ids and the
// queues of those made available.
func repairRelease(t *wtx, nowUS int64, list string) ([]int64, []string, error) {
	rows, err := t.query(qRepairRelease, nowUS, list)
	if err != nil {
		return nil, nil, fmt.Errorf("release pending jobs: %w", err)
	}
	defer rows.Close()
	var ids []int64
	var queues []string
	for rows.Next() {
		var id int64
		var q, state string
		if err := rows.Scan(&id, &q, &state); err != nil {
			return nil, nil, fmt.Errorf("release pending jobs: %w", err)
		}
		ids = append(ids, id)
		if state == string(idemtype.StateAvailable) {
			queues = append(queues, q)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("release pending jobs: %w", err)
	}
	return ids, queues, nil
}

// repairCancel cancels the pending jobs of the JSON id list that need
// their dependencies to complete and have a dead or cancelled one
// (qRepairCancel), with what cancelDependants does for each job it
// cancels: its record settled (onFinal), its own pending dependants
// cancelled or released. It returns every job it cancelled.
func repairCancel(t *wtx, nowUS int64, list string) ([]int64, error) {
	ks, err := cancelledJobs(t, qRepairCancel, nowUS, list)
	if err != nil {
		return nil, fmt.Errorf("cancel pending jobs: %w", err)
	}
	var all []int64
	for _, k := range ks {
		if err := onFinal(t, k.tenant, k.key, k.id, k.dedup, k.ttl, fromUS(nowUS)); err != nil {
			return nil, err
		}
		more, err := cancelDependants(t, k.id, idemtype.StateCancelled, nowUS)
		if err != nil {
			return nil, err
		}
		all = append(append(all, k.id), more...)
	}
	return all, nil
}
