package pgstore

import (
	"fmt"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateNoTxRerunAfterEveryStatement: a no-transaction migration
// stopped after any of its statements (a crash: the statements before it
// done, the version not recorded or not unrecorded) is run again from its
// first statement by the next run, which must succeed and leave the
// schema of a run never stopped, for every no-transaction file, up and
// down, stopped after each statement but the last. It runs in a database
// of its own: each CREATE INDEX CONCURRENTLY waits for every transaction
// of its database older than it, and in the shared one those of the
// tests running beside it made this test take minutes.
func TestMigrateNoTxRerunAfterEveryStatement(t *testing.T) {
	t.Parallel()
	url, schema := dbtest.NewDatabase(t, ""), "idem_crash"
	s, err := Open(t.Context(), withPoolSize(url, 3), &Config{CallerClock: true, Schema: schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	stopAfter := func(sql migrationSQL, k int) {
		t.Helper()
		for _, stmt := range sql.Stmts[:k] {
			if _, err := s.pool.Exec(ctx, s.sql(stmt)); err != nil {
				t.Fatalf("statement before the stop: %v", err)
			}
		}
	}
	_, release, err := s.migrationSession(ctx) // the migrations table only
	if err != nil {
		t.Fatal(err)
	}
	release()
	prev := fullCatalog(t, s) // the schema before m
	for _, m := range ms {
		if _, _, err := s.migrateUp(ctx, m.Version); err != nil {
			t.Fatalf("up to %d: %v", m.Version, err)
		}
		cur := fullCatalog(t, s)
		if m.Down.NoTx {
			for k := 1; k < len(m.Down.Stmts); k++ {
				name := fmt.Sprintf("down %d_%s stopped after statement %d", m.Version, m.Name, k)
				stopAfter(m.Down, k)
				if err := s.MigrateDown(ctx, 1); err != nil {
					t.Fatalf("%s, run again: %v", name, err)
				}
				if got := fullCatalog(t, s); got != prev {
					t.Errorf("%s, run again: the schema differs from the one before the migration:\n%s", name, diffLines(prev, got))
				}
				if _, _, err := s.migrateUp(ctx, m.Version); err != nil {
					t.Fatalf("%s: up again: %v", name, err)
				}
			}
		}
		if m.Up.NoTx {
			for k := 1; k < len(m.Up.Stmts); k++ {
				name := fmt.Sprintf("up %d_%s stopped after statement %d", m.Version, m.Name, k)
				if err := s.MigrateDown(ctx, 1); err != nil {
					t.Fatalf("%s: down first: %v", name, err)
				}
				stopAfter(m.Up, k)
				if _, _, err := s.migrateUp(ctx, m.Version); err != nil {
					t.Fatalf("%s, run again: %v", name, err)
				}
				if got := fullCatalog(t, s); got != cur {
					t.Errorf("%s, run again: the schema differs from a run never stopped:\n%s", name, diffLines(cur, got))
				}
			}
		}
		prev = cur
	}
}
