package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/store"
)

// LeaderAttempt implements store.Leader with one upsert on the leaders
// table: the row is taken over only when its term expired or the owner is
// the same. Unless Config.CallerClock, the database's clock decides whether
// the term expired and the new term is the database's now() plus TTL, so a
// node whose clock runs ahead cannot take over a live leader.
func (s *Store) LeaderAttempt(ctx context.Context, p *store.LeaderParams) (bool, error) {
	db, err := s.db()
	if err != nil {
		return false, err
	}
	now := store.OrNow(p.Now)
	clock := s.expiryClock(now)
	var until *time.Time
	if clock != nil {
		t := now.Add(p.TTL)
		until = &t
	}
	var owner string
	err = db.QueryRow(ctx, s.sql(qLeaderAttempt), p.Name, p.Owner, now, until, micros(p.TTL), clock).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("leader attempt: %w", err)
	}
	return owner == p.Owner, nil
}

// LeaderResign implements store.Leader.
func (s *Store) LeaderResign(ctx context.Context, params *store.LeaderResignParams) error {
	name, owner := params.Name, params.Owner
	db, err := s.db()
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, s.sql(qLeaderResign), name, owner); err != nil {
		return fmt.Errorf("leader resign: %w", err)
	}
	return nil
}
