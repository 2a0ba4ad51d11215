package sqlitestore

import (
	"context"
	"fmt"
)

// Ping is one trivial round trip through the reader pool: it proves the
// store answers (readiness) without reading any table.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.readRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping: %w", s.readErr(err))
	}
	return nil
}
