package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-dev/idem/internal/dbtest"
)

// storeAt opens a store on a schema of a database of its own (see
// newOwnDatabaseStore) migrated up to version v (and no
// further), and returns it with the URL.
func storeAt(t *testing.T, v int) (*Store, string) {
	t.Helper()
	s, url := newOwnDatabaseStore(t, 3, false)
	if _, _, err := s.migrateUp(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	return s, url
}

// newestScopeIndexDef is jobs_running_scope_idx's definition on a schema
// migrated from nothing (in one transaction), with s's schema name.
func newestScopeIndexDef(t *testing.T, s *Store) string {
	t.Helper()
	fresh := newTestStore(t, 2)
	return strings.ReplaceAll(fresh.scopeIndexDef(t), fresh.schema, s.schema)
}

// checkScopeIndexDone checks that jobs_running_scope_idx is the newest
// migration's and that no other index of the schema is invalid or left by
// a build (jobs_running_scope_idx_new).
func checkScopeIndexDone(t *testing.T, s *Store) {
	t.Helper()
	if got, want := s.scopeIndexDef(t), newestScopeIndexDef(t, s); got != want {
		t.Errorf("jobs_running_scope_idx:\n%s\nwant (a schema migrated at once):\n%s", got, want)
	}
	var bad []string
	rows, err := s.pool.Query(t.Context(), `SELECT c.relname || CASE WHEN i.indisvalid THEN '' ELSE ' (INVALID)' END
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND (NOT i.indisvalid OR NOT i.indisready OR c.relname LIKE '%\_new')`, s.schema)
	if err == nil {
		bad, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("indexes left by the migration: %v", bad)
	}
}

// openWriter opens a transaction on its own connection to url that has
// inserted a job into s's schema and stays open (rolled back at the end of
// the test unless the test commits it): a build waits for it.
func openWriter(t *testing.T, s *Store, url string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, s.sql(insertJobSQL)); err != nil {
		t.Fatal(err)
	}
	return tx
}

// connectTimeout opens a connection to url whose statements time out after
// timeout (a PostgreSQL interval); it is closed at the end of the test.
func connectTimeout(t *testing.T, url, timeout string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	if _, err := conn.Exec(ctx, `SET statement_timeout = '`+timeout+`'`); err != nil {
		t.Fatal(err)
	}
	return conn
}

// insertJobSQL inserts one job row with the columns that have no default.
const insertJobSQL = `INSERT INTO {schema}.jobs (tenant, queue, kind, state, max_attempts, run_at, created_at)
VALUES ('t', 'q', 'k', 'available', 1, now(), now())`

// TestMigrateIndexBuildDoesNotBlockJobs: an upgrade from 0027 rebuilds
// jobs_running_scope_idx twice (0028, 0030) while a transaction that wrote
// into jobs stays open (a user's EnqueueTx, a long report). The rebuilds
// used to DROP INDEX in the migration's transaction: its ACCESS EXCLUSIVE
// request queued behind that transaction, and every read and write of jobs
// queued behind it (here: timed out after 3 s). Built concurrently, the
// index waits for that transaction while reads and writes go on; once it
// commits the upgrade ends, with the index a migration from nothing
// builds. Two processes migrate at once, as nodes starting together: one
// applies every version, the other none, and neither fails (a process
// waiting for the migration lock holds a snapshot, which the concurrent
// build would wait for: see lockWait).
func TestMigrateIndexBuildDoesNotBlockJobs(t *testing.T) {
	t.Parallel()
	s, url := storeAt(t, 27)
	ctx := t.Context()
	other, err := Open(ctx, withPoolSize(url, 2), &Config{CallerClock: true, Schema: s.schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	tx := openWriter(t, s, url) // the transaction left open

	type result struct {
		applied []int
		err     error
	}
	results := make(chan result, 2)
	for _, st := range []*Store{s, other} {
		go func() {
			_, applied, err := st.MigrateUp(ctx)
			results <- result{applied, err}
		}()
	}
	// The migration of jobs_running_scope_idx waits for the open
	// transaction (the DROP INDEX's lock, or the concurrent build's wait
	// for the transactions writing into jobs).
	watch, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	dbtest.UntilLocks(t, watch, true, nil, "no migration waits for the open transaction",
		`SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'
  AND query LIKE '%' || $1 || '%' AND query LIKE '%jobs_running_scope_idx%')`, s.schema)

	// Meanwhile another session reads and writes jobs.
	third := connectTimeout(t, url, "3s")
	var n int
	if err := third.QueryRow(ctx, s.sql(`SELECT count(*) FROM {schema}.jobs`)).Scan(&n); err != nil {
		t.Errorf("reading jobs during the migration: %v", err)
	}
	if _, err := third.Exec(ctx, s.sql(insertJobSQL)); err != nil {
		t.Errorf("writing jobs during the migration: %v", err)
	}
	select {
	case r := <-results:
		t.Fatalf("a migration ended while the transaction was open: %+v", r)
	default:
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var all []int
	for range 2 {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("migrate: %v", r.err)
			}
			all = append(all, r.applied...)
			if len(r.applied) != 0 && len(r.applied) != stepsAbove(t, 27) {
				t.Errorf("a migration applied %v: want all of the pending ones or none", r.applied)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the migration did not end after the transaction committed")
		}
	}
	slices.Sort(all)
	if len(all) != stepsAbove(t, 27) || all[0] != 28 || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("applied between them: %v, want each version after 27 once", all)
	}
	checkScopeIndexDone(t, s)
	if err := third.QueryRow(ctx, s.sql(`SELECT count(*) FROM {schema}.jobs`)).Scan(&n); err != nil || n != 2 {
		t.Errorf("jobs after the migration: %d %v, want 2", n, err)
	}
}

// TestMigrateAfterInterruptedIndexBuild: a migration rebuilding
// jobs_running_scope_idx stopped midway (a crash, a cancel) is run again
// from its first statement by the next Migrate, which ends with the
// index of a migration from nothing and nothing else left:
//   - a CREATE INDEX CONCURRENTLY cancelled while it waited left an
//     INVALID jobs_running_scope_idx_new beside the old index;
//   - the old index was dropped and the new one not renamed yet.
func TestMigrateAfterInterruptedIndexBuild(t *testing.T) {
	t.Parallel()
	t.Run("invalid build left", func(t *testing.T) {
		t.Parallel()
		s, url := storeAt(t, 27)
		ctx := t.Context()
		// A build waits for the transactions writing into jobs: one is
		// open, and the build is cancelled by its statement timeout.
		tx := openWriter(t, s, url)
		build := connectTimeout(t, url, "300ms")
		_, err := build.Exec(ctx, s.sql(`CREATE INDEX CONCURRENTLY jobs_running_scope_idx_new ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL)`))
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "57014" {
			t.Fatalf("the interrupted build: %v, want a statement timeout", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var valid bool
		if err := s.pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`,
			s.sql("{schema}.jobs_running_scope_idx_new")).Scan(&valid); err != nil || valid {
			t.Fatalf("the interrupted build left: valid %v, %v; want an INVALID index", valid, err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		checkScopeIndexDone(t, s)
	})
	t.Run("old index dropped, new one not renamed", func(t *testing.T) {
		t.Parallel()
		s, _ := storeAt(t, 27)
		ctx := t.Context()
		for _, q := range []string{
			`CREATE INDEX jobs_running_scope_idx_new ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL)`,
			`DROP INDEX {schema}.jobs_running_scope_idx`,
		} {
			if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		checkScopeIndexDone(t, s)
	})
}

// TestMigrationStatements: the statements of a no-transaction migration
// are its ";"-terminated groups of lines, comments kept; a ";" elsewhere
// is refused; run in a transaction they lose CONCURRENTLY. Every embedded
// migration loads (the no-transaction ones split).
func TestMigrationStatements(t *testing.T) {
	got, err := splitStatements(`-- idem:no-transaction
-- a comment; with a semicolon
DROP INDEX CONCURRENTLY IF EXISTS {schema}.x_new;

CREATE INDEX CONCURRENTLY x_new ON {schema}.t (a)
    WHERE b = 1;
-- the end
`)
	want := []string{
		"-- idem:no-transaction\n-- a comment; with a semicolon\nDROP INDEX CONCURRENTLY IF EXISTS {schema}.x_new;\n",
		"\nCREATE INDEX CONCURRENTLY x_new ON {schema}.t (a)\n    WHERE b = 1;\n",
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("splitStatements: %q %v, want %q", got, err, want)
	}
	for _, bad := range []string{
		"SELECT 1; SELECT 2;\n",
		"SELECT ';'\n;\n",
		"SELECT 1; -- done\n",
		"SELECT 1;\nSELECT 2\n",
		"-- nothing\n",
		// A function body whose lines end in ";" would be cut inside it.
		"CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n  PERFORM 1;\nEND;\n$$ LANGUAGE plpgsql;\n",
		"CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1 $body$ LANGUAGE sql;\n",
		// A comment after code could end a line with ";" mid-statement.
		"CREATE INDEX x ON t (a) -- note;\nWHERE b;\n",
		"SELECT 1; -- fine;\n",
	} {
		if got, err := splitStatements(bad); err == nil {
			t.Errorf("splitStatements(%q) = %q, want an error", bad, got)
		}
	}
	for in, want := range map[string]string{
		"-- c\nCREATE INDEX CONCURRENTLY x ON t (a);\n":       "-- c\nCREATE INDEX x ON t (a);\n",
		"create unique index concurrently x on t (a);":        "create unique index x on t (a);",
		"DROP INDEX\n    CONCURRENTLY IF EXISTS s.x;":         "DROP INDEX IF EXISTS s.x;",
		"ALTER INDEX s.x_new RENAME TO x;":                    "ALTER INDEX s.x_new RENAME TO x;",
		"CREATE INDEX concurrently_named ON t (a);":           "CREATE INDEX concurrently_named ON t (a);",
		"REINDEX (VERBOSE) INDEX CONCURRENTLY s.x;":           "REINDEX (VERBOSE) INDEX s.x;",
		"UPDATE t SET note = 'CREATE INDEX CONCURRENTLY' ;\n": "UPDATE t SET note = 'CREATE INDEX CONCURRENTLY' ;\n",
	} {
		if got := inTransaction(in); got != want {
			t.Errorf("inTransaction(%q) = %q, want %q", in, got, want)
		}
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, d := range []migrationSQL{m.Up, m.Down} {
			if d.NoTx && len(d.Stmts) == 0 {
				t.Errorf("migration %d: no statements", m.Version)
			}
		}
	}
}

// catalog describes what the migrations made of s's schema (columns in
// order, with types, defaults and NOT NULL; indexes with their validity;
// constraints; table options; triggers), one line each, sorted, the
// schema's name written SCHEMA.
func catalog(t *testing.T, s *Store) string {
	t.Helper()
	var out string
	err := s.pool.QueryRow(t.Context(), `SELECT string_agg(line, E'\n' ORDER BY line) FROM (
    SELECT format('column %s %s %s %s %s %s', c.relname,
            row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum), a.attname,
            format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid)) AS line
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = to_regnamespace($1) AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('index %s valid %s ready %s', pg_get_indexdef(i.indexrelid), i.indisvalid, i.indisready)
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = to_regnamespace($1)
    UNION ALL
    SELECT format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
        FROM pg_constraint WHERE connamespace = to_regnamespace($1)
    UNION ALL
    SELECT format('options %s %s', relname, reloptions) FROM pg_class
        WHERE relnamespace = to_regnamespace($1) AND reloptions IS NOT NULL
    UNION ALL
    SELECT format('trigger %s', pg_get_triggerdef(t.oid)) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = to_regnamespace($1) AND NOT t.tgisinternal
) x`, s.schema).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(out, s.schema, "SCHEMA")
}

// TestMigrateStepwiseMatchesAtOnce: a schema migrated from nothing (one
// transaction: the no-transaction migrations run there without
// CONCURRENTLY) and one at version 1 migrated up (every no-transaction
// migration on its own, concurrently), then down to 1 and up again, end
// with the same columns, indexes (all valid), constraints, table options
// and triggers.
func TestMigrateStepwiseMatchesAtOnce(t *testing.T) {
	t.Parallel()
	want := catalog(t, newTestStore(t, 2))
	s, _ := storeAt(t, 1)
	ctx := t.Context()
	check := func(when string) {
		t.Helper()
		if got := catalog(t, s); got != want {
			t.Fatalf("%s: the schema differs from one migrated at once:\n%s\nwant:\n%s", when, got, want)
		}
	}
	if _, applied, err := s.MigrateUp(ctx); err != nil || len(applied) != stepsAbove(t, 1) {
		t.Fatalf("migrate up from 1: %v %v", applied, err)
	}
	check("migrated up from version 1")
	if err := s.MigrateDown(ctx, stepsAbove(t, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	check("down to version 1 and up again")
}

// TestMigrateCurrentSchemaTakesNoLock: Migrate on a schema that has every
// version (a node's usual start) neither takes nor waits for the migration
// lock: with the lock held by another session it returns at once,
// reporting the newest version and nothing applied. A schema that lacks a
// version still waits for the lock.
func TestMigrateCurrentSchemaTakesNoLock(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 3)
	holder, err := pgx.Connect(t.Context(), dbtest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(t.Context())
	if _, err := holder.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, s.lockKey()); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].Version
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	from, applied, err := s.MigrateUp(ctx)
	if err != nil || from != newest || len(applied) != 0 {
		t.Fatalf("MigrateUp of a current schema while another session holds the lock: from %d, applied %v, %v; want %d, none, nil",
			from, applied, err, newest)
	}

	if _, err := s.pool.Exec(t.Context(), s.sql(qMigrationsDelete), newest); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel2()
	if _, _, err := s.MigrateUp(short); err == nil {
		t.Fatal("MigrateUp of a schema lacking a version did not wait for the migration lock")
	}
}
