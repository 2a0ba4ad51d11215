package sqlitestore

import (
	"context"
	"fmt"
)

// SchemaVersion returns the highest migration applied to the file and the
// highest this binary embeds. Readiness compares them: a node whose schema
// is behind (or ahead, after a newer binary migrated) must not serve.
func (s *Store) SchemaVersion(ctx context.Context) (applied, expected int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, fmt.Errorf("schema version: %w", err)
	}
	if len(ms) > 0 {
		expected = ms[len(ms)-1].version
	}
	if err := s.readRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return 0, expected, fmt.Errorf("schema version: %w", s.readErr(err))
	}
	return applied, expected, nil
}
