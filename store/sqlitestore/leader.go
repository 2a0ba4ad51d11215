package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// LeaderAttempt implements store.Leader.
func (s *Store) LeaderAttempt(ctx context.Context, p *store.LeaderParams) (bool, error) {
	now := store.OrNow(p.Now)
	var leads bool
	err := s.write(ctx, 1, func(t *wtx) error {
		var owner string
		err := t.queryRow(qLeaderAttempt, p.Name, p.Owner, toUS(now.Add(p.TTL)), toUS(now)).Scan(&owner)
		if errors.Is(err, sql.ErrNoRows) {
			leads = false
			return nil
		}
		leads = err == nil && owner == p.Owner
		return err
	})
	if err != nil {
		return false, fmt.Errorf("leader attempt: %w", err)
	}
	return leads, nil
}

// LeaderResign implements store.Leader.
func (s *Store) LeaderResign(ctx context.Context, params *store.LeaderResignParams) error {
	name, owner := params.Name, params.Owner
	err := s.write(ctx, 1, func(t *wtx) error {
		_, err := t.exec(qLeaderResign, name, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("leader resign: %w", err)
	}
	return nil
}
