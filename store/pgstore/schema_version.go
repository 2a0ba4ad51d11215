package pgstore

import (
	"context"
	"fmt"
)

// SchemaVersion returns the highest migration applied to the schema and
// the highest this binary embeds. Readiness compares them: a node whose
// schema is behind (or ahead, after a newer binary migrated) must not serve.
func (s *Store) SchemaVersion(ctx context.Context) (applied, expected int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", err)
	}
	if len(ms) > 0 {
		expected = ms[len(ms)-1].Version
	}
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT coalesce(max(version), 0) FROM {schema}.migrations`)).Scan(&applied); err != nil {
		return 0, expected, fmt.Errorf("schema version: %w", err)
	}
	return applied, expected, nil
}
