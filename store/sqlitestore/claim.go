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
			ids, err := selectIDs(t, qClaimPromote, q, now)
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
	s.announce(store.PromotedLeft(promoted, out))
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
