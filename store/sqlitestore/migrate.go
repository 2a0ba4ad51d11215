package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.up.sql
var migrationsFS embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationsFS, "migrations/*.up.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, path := range names {
		base := strings.TrimPrefix(path, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.up.sql", base)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", base, err)
		}
		body, err := migrationsFS.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(base, ".up.sql"), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			// Two migrations with one number: only one would ever run.
			return nil, fmt.Errorf("migrations %s and %s share a version", out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// Migrate implements store.Store. It runs in the writer's transaction, which
// begins with BEGIN IMMEDIATE: a second process migrating the same file
// waits for the lock and then finds every version applied.
func (s *Store) Migrate(ctx context.Context) error {
	_, _, err := s.MigrateUp(ctx)
	return err
}

// MigrateUp is Migrate, reporting what this call did: from is the newest
// version applied before it (0 on a new file) and applied the versions it
// applied itself, both read in its write transaction, so a process that
// waited for another's migration reports none.
func (s *Store) MigrateUp(ctx context.Context) (from int, applied []int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, nil, fmt.Errorf("migrate: %w", err)
	}
	err = s.write(ctx, 1, func(t *wtx) error {
		from, applied = 0, nil // a retried operation starts over
		t.flow.invalidate()    // a migration may change flow_controls
		if _, err := t.conn.ExecContext(context.Background(), qMigrationsTable); err != nil {
			return err
		}
		for _, m := range ms {
			var n int
			if err := t.conn.QueryRowContext(context.Background(), qMigrationApplied, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				from = max(from, m.version)
				continue
			}
			if _, err := t.conn.ExecContext(context.Background(), m.sql); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if _, err := t.conn.ExecContext(context.Background(), qMigrationInsert, m.version, m.name, time.Now().UnixMicro()); err != nil {
				return err
			}
			applied = append(applied, m.version)
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("migrate: %w", err)
	}
	return from, applied, nil
}
