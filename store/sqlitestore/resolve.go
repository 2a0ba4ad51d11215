package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobResolve implements store.Jobs.
func (s *Store) JobResolve(ctx context.Context, p *store.JobResolveParams) (*idemtype.JobRow, error) {
	now := truncUS(store.OrNow(p.Now))
	var out *idemtype.JobRow
	err := s.write(ctx, 1, func(t *wtx) error {
		if _, err := t.exec(qJobResolve, p.ID, toUS(now), p.Note, p.Tenant); err != nil {
			return err
		}
		j, err := scanJob(t.queryRow(qJobCancelGet, p.ID, p.Tenant))
		if errors.Is(err, sql.ErrNoRows) {
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
