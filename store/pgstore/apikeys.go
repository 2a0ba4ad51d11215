package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

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
func (s *Store) APIKeyByHash(ctx context.Context, params *store.APIKeyByHashParams) (*store.APIKey, error) {
	hash := params.Hash
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
	out, err := collect(rows, scanAPIKey)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// APIKeyRevoke implements store.APIKeys.
func (s *Store) APIKeyRevoke(ctx context.Context, params *store.APIKeyRevokeParams) error {
	id, now := params.ID, params.Now
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
