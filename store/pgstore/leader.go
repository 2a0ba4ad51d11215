package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// LeaderAttempt implements store.Leader with one upsert on the leaders
// table: the row is taken over only when its term expired or the owner is
// the same.
func (s *Store) LeaderAttempt(ctx context.Context, p *store.LeaderParams) (bool, error) {
	db, err := s.db()
	if err != nil {
		return false, err
	}
	now := store.OrNow(p.Now)
	var owner string
	err = db.QueryRow(ctx, s.sql(qLeaderAttempt), p.Name, p.Owner, now, now.Add(p.TTL)).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("leader attempt: %w", err)
	}
	return owner == p.Owner, nil
}

// LeaderResign implements store.Leader.
func (s *Store) LeaderResign(ctx context.Context, name, owner string) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, s.sql(qLeaderResign), name, owner); err != nil {
		return fmt.Errorf("leader resign: %w", err)
	}
	return nil
}

// APIKeyCreate implements store.APIKeys.
func (s *Store) APIKeyCreate(ctx context.Context, k *store.APIKey) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, s.sql(qAPIKeyCreate), k.ID, k.Hash, k.Tenant, k.Admin, k.Name,
		store.OrNow(k.CreatedAt), k.RevokedAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" || err == nil && tag.RowsAffected() == 0 {
		return fmt.Errorf("create api key: %w", idemtype.Invalid("id", "api key %q (or its hash) already exists", k.ID))
	}
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
}

// APIKeyByHash implements store.APIKeys.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	k, err := scanAPIKey(db.QueryRow(ctx, s.sql(qAPIKeyByHash), hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("api key: %w", idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("api key: %w", err)
	}
	return k, nil
}

// APIKeyList implements store.APIKeys.
func (s *Store) APIKeyList(ctx context.Context) ([]*store.APIKey, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, s.sql(qAPIKeyList))
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []*store.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// APIKeyRevoke implements store.APIKeys.
func (s *Store) APIKeyRevoke(ctx context.Context, id string, now time.Time) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, s.sql(qAPIKeyRevoke), id, store.OrNow(now))
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke api key %q: %w", id, idemtype.ErrNotFound)
	}
	return nil
}
