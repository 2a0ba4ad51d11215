package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobClaim implements store.Jobs.
func (s *Store) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	if len(p.Queues) == 0 {
		return nil, fmt.Errorf("claim jobs: %w", idemtype.Invalid("queues", "at least one queue"))
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	now := toUS(store.OrNow(p.Now))
	// UPDATE … WHERE id IN (candidates) RETURNING: one statement claims the
	// batch; each row gets its own random token from SQLite's CSPRNG.
	var sb strings.Builder
	args := []any{now, nullUS(p.LeaseUntil), p.WorkerID}
	sb.WriteString(`UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at = ?1,
    lease_token = lower(hex(randomblob(16))), lease_expires_at = ?2, worker_id = ?3
WHERE id IN (SELECT j.id FROM jobs j WHERE j.` + sqlClaimable + ` AND j.run_at <= ?1 AND j.queue IN (`)
	for i, q := range p.Queues {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('?')
		args = append(args, q)
	}
	sb.WriteByte(')')
	if len(p.Kinds) > 0 {
		sb.WriteString(" AND j.kind IN (" + placeholders(len(p.Kinds)) + ")")
		for _, k := range p.Kinds {
			args = append(args, k)
		}
	}
	if p.Tenant != "" {
		sb.WriteString(" AND j.tenant = ?")
		args = append(args, p.Tenant)
	}
	sb.WriteString(qClaimHead)
	// The limit is part of the text, not a parameter: SQLite plans with a
	// bound LIMIT's value, so rebinding another limit would expire the
	// statement and recompile it on every claim. Each limit gets its own
	// cached statement instead.
	sb.WriteString(" ORDER BY j.priority DESC, j.run_at, j.id LIMIT " + strconv.Itoa(p.Limit) + ") RETURNING " + jobCols)
	q := sb.String()

	var out []*idemtype.JobRow
	err := s.write(ctx, p.Limit, func(t *wtx) error {
		out = out[:0]
		rows, err := t.query(q, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, j)
		}
		rows.Close()
		// The attempt is stored as a row only when it ends; until then
		// AttemptList reads it from the job row.
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
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
