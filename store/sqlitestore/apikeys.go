package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// APIKeyCreate implements store.APIKeys.
func (s *Store) APIKeyCreate(ctx context.Context, k *store.APIKey) error {
	if k.ID == "" {
		return fmt.Errorf("create api key: %w", idemtype.Invalid("id", "empty"))
	}
	created := store.OrNow(k.CreatedAt)
	var revoked any
	if k.RevokedAt != nil {
		revoked = toUS(*k.RevokedAt)
	}
	err := s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(qAPIKeyCreate, k.ID, k.Hash, k.Tenant, boolInt(k.Admin), k.Name, toUS(created), revoked)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return idemtype.Invalid("id", "api key %q already exists", k.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
}

// APIKeyByHash implements store.APIKeys.
func (s *Store) APIKeyByHash(ctx context.Context, params *store.APIKeyByHashParams) (*store.APIKey, error) {
	hash := params.Hash
	k, err := scanAPIKey(s.readRow(ctx, qAPIKeyByHash, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("api key: %w", idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("api key: %w", s.readErr(err))
	}
	return k, nil
}

// APIKeyList implements store.APIKeys.
func (s *Store) APIKeyList(ctx context.Context) ([]*store.APIKey, error) {
	rows, err := s.rdb.QueryContext(ctx, qAPIKeyList)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", s.readErr(err))
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
	nowUS := toUS(store.OrNow(now))
	err := s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(qAPIKeyRevoke, nowUS, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("api key %q: %w", id, idemtype.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	return nil
}
