package pgstore

import (
	"context"
	"fmt"
)

// Ping is one trivial round trip to the database: it proves the store
// answers (readiness) without reading any table; store.ErrClosed after
// Close.
func (s *Store) Ping(ctx context.Context) error {
	db, err := s.db()
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	var one int
	if err := db.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}
