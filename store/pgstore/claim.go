package pgstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// JobClaim implements store.Jobs (see claimFlow). A claim whose
// promotions left jobs available notifies its queues (announceLeftover).
func (s *Store) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	if p.Limit <= 0 || len(p.Queues) == 0 {
		return nil, nil
	}
	ctx, promoted := withPromoteTally(ctx)
	jobs, err := s.claimFlow(ctx, p)
	s.announceLeftover(ctx, promoted, jobs)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	sortClaimed(jobs)
	s.noteClaimed(len(jobs))
	return jobs, nil
}

// sortClaimed orders claimed jobs by priority descending, run_at, id.
func sortClaimed(jobs []*idemtype.JobRow) {
	sort.Slice(jobs, func(a, b int) bool {
		x, y := jobs[a], jobs[b]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !x.RunAt.Equal(y.RunAt) {
			return x.RunAt.Before(y.RunAt)
		}
		return x.ID < y.ID
	})
}

// JobHeartbeatMany implements store.Jobs.
func (s *Store) JobHeartbeatMany(ctx context.Context, p *store.JobHeartbeatParams) ([]error, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	ids, tokens := splitLeases(p.Leases)
	now := store.OrNow(p.Now)
	clock := s.expiryClock(now)
	var until *time.Time // NULL: the database's now plus the lease's length
	if clock != nil || p.Absolute {
		until = &p.Until
	}
	rows, err := db.Query(ctx, s.sql(qHeartbeat), ids, tokens, until, clock, micros(p.Until.Sub(now)))
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	alive := map[int64]time.Time{}
	var id int64
	var end time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &end}, func() error { alive[id] = end.UTC(); return nil }); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	out := make([]error, len(p.Leases))
	for i, l := range p.Leases {
		end, ok := alive[l.ID]
		if !ok {
			out[i] = fmt.Errorf("heartbeat job %d: %w", l.ID, idemtype.ErrLeaseLost)
		} else if len(p.Ends) == len(p.Leases) {
			p.Ends[i] = end // the database's clock may have moved it past Until
		}
	}
	return out, nil
}

// splitLeases returns the ids and tokens of leases.
func splitLeases(ls []store.Lease) ([]int64, []string) {
	ids := make([]int64, len(ls))
	tokens := make([]string, len(ls))
	for i, l := range ls {
		ids[i], tokens[i] = l.ID, l.Token
	}
	return ids, tokens
}
