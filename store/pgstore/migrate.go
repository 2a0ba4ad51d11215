package pgstore

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered step: NNNN_name.up.sql and NNNN_name.down.sql.
type migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

// MigrationStatus is the state of one migration: one this binary knows,
// or (Unknown) one a newer binary applied.
type MigrationStatus struct {
	Version   int
	Name      string
	Applied   bool
	AppliedAt *time.Time
	// Unknown is set for a version applied to the schema that this binary
	// has no migration of (a newer idem applied it); Name is the one that
	// binary recorded.
	Unknown bool
}

// loadMigrations reads the embedded migrations, ordered by version.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*migration{}
	for _, e := range entries {
		name := e.Name()
		base, dir, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), ".")
		num, label, ok2 := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || (dir != "up" && dir != "down") {
			return nil, fmt.Errorf("migration file %q: want NNNN_name.up.sql or .down.sql", name)
		}
		body, err := migrationFS.ReadFile("migrations/" + name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		m := byVersion[v]
		if m == nil {
			m = &migration{Version: v, Name: label}
			byVersion[v] = m
		}
		if m.Name != label {
			// Two migrations with one number: only one would ever run.
			return nil, fmt.Errorf("migrations %04d_%s and %04d_%s share a version", v, m.Name, v, label)
		}
		if dir == "up" {
			m.Up = string(body)
		} else {
			m.Down = string(body)
		}
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %d: missing up or down file", m.Version)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// lockKey is the advisory lock key that serialises migrations of a schema.
func (s *Store) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("idem-migrate:" + s.schema))
	return int64(h.Sum64())
}

// lockMigrations takes the transaction-level advisory lock of the schema
// and makes sure the schema and its migrations table exist.
func (s *Store) lockMigrations(ctx context.Context, tx pgx.Tx) (map[int]time.Time, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey()); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, s.sql(qMigrationsTable)); err != nil {
		return nil, fmt.Errorf("migrate: create migrations table: %w", err)
	}
	rows, err := tx.Query(ctx, s.sql(qMigrationsApplied))
	if err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	applied := map[int]time.Time{}
	var v int
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&v, &at}, func() error { applied[v] = at.UTC(); return nil })
	if err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	return applied, nil
}

// Migrate brings the schema to the newest version, in one transaction under
// a transaction-level advisory lock: several processes migrating at once
// wait for each other and the later ones find nothing to do.
func (s *Store) Migrate(ctx context.Context) error {
	_, _, err := s.MigrateUp(ctx)
	return err
}

// MigrateUp is Migrate, reporting what this call did: from is the newest
// version applied before it (0 on a new schema) and applied the versions
// it applied itself, both read under the migration lock, so a process
// that waited for another's migration reports none.
func (s *Store) MigrateUp(ctx context.Context) (from int, applied []int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, nil, err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		from, applied = 0, nil // a retried transaction starts over
		done, err := s.lockMigrations(ctx, tx)
		if err != nil {
			return err
		}
		for v := range done {
			from = max(from, v)
		}
		for _, m := range ms {
			if _, ok := done[m.Version]; ok {
				continue
			}
			if _, err := tx.Exec(ctx, s.sql(m.Up)); err != nil {
				return fmt.Errorf("migrate: up %d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, s.sql(qMigrationsInsert), m.Version, m.Name); err != nil {
				return fmt.Errorf("migrate: record %d: %w", m.Version, err)
			}
			applied = append(applied, m.Version)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return from, applied, nil
}

// MigrateDown undoes the newest steps applied migrations (all when steps
// <= 0), in one transaction under the migration lock.
func (s *Store) MigrateDown(ctx context.Context, steps int) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		applied, err := s.lockMigrations(ctx, tx)
		if err != nil {
			return err
		}
		done := 0
		for i := len(ms) - 1; i >= 0 && (steps <= 0 || done < steps); i-- {
			m := ms[i]
			if _, ok := applied[m.Version]; !ok {
				continue
			}
			if _, err := tx.Exec(ctx, s.sql(m.Down)); err != nil {
				return fmt.Errorf("migrate: down %d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, s.sql(qMigrationsDelete), m.Version); err != nil {
				return fmt.Errorf("migrate: unrecord %d: %w", m.Version, err)
			}
			done++
		}
		return nil
	})
}

// MigrationStatus lists every migration this binary embeds, each applied
// (with its time) or pending, and every version applied to the schema that
// it does not embed (Unknown: a newer binary applied it), by version. It
// only reads: on a schema that does not
// exist, or has no migrations table yet, every version is pending and
// nothing is created (SchemaExists tells the two apart).
func (s *Store) MigrationStatus(ctx context.Context) ([]MigrationStatus, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	type row struct {
		name string
		at   time.Time
	}
	applied := map[int]row{}
	var versions []int // applied, ascending
	var table bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.sql("{schema}.migrations")).Scan(&table); err != nil {
		return nil, fmt.Errorf("migrate: read versions: %w", err)
	}
	if table {
		rows, err := s.pool.Query(ctx, s.sql(qMigrationsListed))
		if err != nil {
			return nil, fmt.Errorf("migrate: read versions: %w", err)
		}
		var v int
		var name string
		var at time.Time
		if _, err := pgx.ForEachRow(rows, []any{&v, &name, &at}, func() error {
			applied[v] = row{name, at.UTC()}
			versions = append(versions, v)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("migrate: read versions: %w", err)
		}
	}
	out := make([]MigrationStatus, len(ms), len(ms)+len(versions))
	known := map[int]bool{}
	for i, m := range ms {
		known[m.Version] = true
		out[i] = MigrationStatus{Version: m.Version, Name: m.Name}
		if r, ok := applied[m.Version]; ok {
			out[i].Applied = true
			out[i].AppliedAt = &r.at
		}
	}
	// Versions a newer binary applied, after the known ones (in order).
	for _, v := range versions {
		if !known[v] {
			r := applied[v]
			out = append(out, MigrationStatus{Version: v, Name: r.name, Applied: true, AppliedAt: &r.at, Unknown: true})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// SchemaExists reports whether the store's schema exists (it may still
// have no table: `idem migrate` creates them).
func (s *Store) SchemaExists(ctx context.Context) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, s.schema).Scan(&ok); err != nil {
		return false, fmt.Errorf("schema exists: %w", err)
	}
	return ok, nil
}
