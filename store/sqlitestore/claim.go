package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobClaim implements store.Jobs.
func (s *Store) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	if len(p.Queues) == 0 {
		return nil, fmt.Errorf("claim jobs: %w", idemtype.Invalid("queues", "at least one queue"))
	}
	if p.Limit <= 0 || (p.Kinds != nil && len(p.Kinds) == 0) {
		return nil, nil // no kind: nothing to claim (nil is any kind)
	}
	now := toUS(store.OrNow(p.Now))
	var out []*idemtype.JobRow
	var promoted map[string][]int64
	err := s.write(ctx, p.Limit, func(t *wtx) error {
		promoted = nil // a write function may run again
		for _, q := range p.Queues {
			ids, err := promoteDue(t, q, now)
			if err != nil {
				return fmt.Errorf("promote due jobs: %w", err)
			}
			if len(ids) > 0 {
				if promoted == nil {
					promoted = map[string][]int64{}
				}
				promoted[q] = append(promoted[q], ids...)
			}
		}
		var err error
		out, err = s.claimFair(t, p, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	s.announce(leftover(promoted, out))
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !x.RunAt.Equal(y.RunAt) {
			return x.RunAt.Before(y.RunAt)
		}
		return x.ID < y.ID
	})
	return out, nil
}

// promoteDue runs qClaimPromote for queue at now in t and returns the
// ids it made available (nil when none).
func promoteDue(t *wtx, queue string, now int64) ([]int64, error) {
	rows, err := t.query(qClaimPromote, queue, now)
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

// leftover returns the queues where a claim's promotions made jobs
// available (promoted, by queue) that it did not take (out): their other
// claimers are told after the commit (announce), as the promoter's
// OnPromote tells them of what it promotes. What counts is the promoted
// ids left, not how many jobs of the queue it took (an older available job
// ranks before a promoted one); a claim that took every job it promoted
// announces nothing, nor one that failed (its transaction rolled back).
func leftover(promoted map[string][]int64, out []*idemtype.JobRow) []string {
	var queues []string
	var taken map[int64]bool
	for q, ids := range promoted {
		if len(ids) > len(out) {
			queues = append(queues, q) // it cannot have taken them all
			continue
		}
		if taken == nil {
			taken = make(map[int64]bool, len(out))
			for _, j := range out {
				taken[j.ID] = true
			}
		}
		for _, id := range ids {
			if !taken[id] {
				queues = append(queues, q)
				break
			}
		}
	}
	return queues
}

// JobHeartbeatMany implements store.Jobs.
func (s *Store) JobHeartbeatMany(ctx context.Context, p *store.JobHeartbeatParams) ([]error, error) {
	if len(p.Leases) == 0 {
		return nil, nil
	}
	until := toUS(p.Until)
	now := toUS(store.OrNow(p.Now))
	errs := make([]error, len(p.Leases))
	err := s.write(ctx, len(p.Leases), func(t *wtx) error {
		for i, l := range p.Leases {
			var tenant, key string
			err := t.queryRow(qHeartbeat, until, l.ID, l.Token, now).Scan(&tenant, &key)
			if errors.Is(err, sql.ErrNoRows) {
				errs[i] = fmt.Errorf("heartbeat job %d: %w", l.ID, idemtype.ErrLeaseLost)
				continue
			}
			if err != nil {
				return err
			}
			errs[i] = nil
			if key != "" {
				if _, err := t.exec(qKeyLeaseExtend, until, tenant, key, store.JobOwner(l.ID)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	return errs, nil
}
