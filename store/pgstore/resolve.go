package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobResolve implements store.Jobs.
func (s *Store) JobResolve(ctx context.Context, p *store.JobResolveParams) (*idemtype.JobRow, error) {
	now := store.OrNow(p.Now)
	var out *idemtype.JobRow
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql(qJobResolve), p.ID, now, p.Note, p.Tenant); err != nil {
			return err
		}
		j, err := scanJob(tx.QueryRow(ctx, s.sql(qJobGet), p.ID, p.Tenant))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("job %d: %w", p.ID, idemtype.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if j.State != idemtype.StateDead {
			return fmt.Errorf("job %d is %s, not dead: %w", p.ID, j.State, idemtype.ErrWrongState)
		}
		out = j
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resolve job: %w", err)
	}
	return out, nil
}
