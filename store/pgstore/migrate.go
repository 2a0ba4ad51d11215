package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations are numbered files NNNN_name.up.sql and NNNN_name.down.sql
// with {schema} for the schema's quoted name (Store.sql).
//
// A file holding the line
//
//	-- idem:no-transaction
//
// (noTxMarker; first, by convention) is a no-transaction migration, as
// goose's "-- +goose NO TRANSACTION": CREATE INDEX CONCURRENTLY and DROP
// INDEX CONCURRENTLY cannot run in a transaction block, nor in a string of
// several statements (an implicit transaction). The migrator commits the
// transactional migrations before it, then runs its statements one at a
// time, each its own transaction, then records its version (and goes on
// with the next ones). Its statements are split by lines: a statement ends
// with the line whose last character (trailing blanks aside) is ";", and a
// comment line ("--" first) never ends one; every other ";" (in a string,
// after a statement on its line), a comment after code on a line, and
// dollar quoting (a function body) are refused when the migrations load
// (splitStatements): a no-transaction file holds plain DDL. A crash or an error midway leaves the
// statements before it done and the version unrecorded, so the next
// migration runs them all again: each must be idempotent, and an index
// built concurrently must first drop a leftover of its name (an
// interrupted CREATE INDEX CONCURRENTLY leaves an INVALID index):
//
//	DROP INDEX CONCURRENTLY IF EXISTS {schema}.x_new;
//	CREATE INDEX CONCURRENTLY x_new ON {schema}.t (...);
//	DROP INDEX CONCURRENTLY IF EXISTS {schema}.x;
//	ALTER INDEX {schema}.x_new RENAME TO x;
//
// (renaming an index takes SHARE UPDATE EXCLUSIVE on the index alone:
// reads and writes of the table go on).
//
// A run that creates the schema's tables (nothing applied before it) or
// drops them (it undoes version 1) runs every migration, no-transaction
// ones included, in one transaction, with CONCURRENTLY left out of those
// statements (inTransaction): new tables are seen by no other session
// until that transaction commits, and tables about to be dropped are
// locked ACCESS EXCLUSIVE by the DROP TABLE anyway, while a concurrent
// build would wait for every older transaction of the database.
//
// A whole run (Migrate, MigrateUp, MigrateDown) holds the schema's
// migration lock, a session-level advisory lock, on one connection, which
// runs its transactions and its no-transaction statements
// (migrationLock; migrationSession for the runs that apply, which also
// create the migrations table): runs of several processes are serialised,
// and each reads the applied versions once it holds the lock.
const noTxMarker = "-- idem:no-transaction"

// ErrSchemaNewer is the error of MigrateDown on a schema that has a
// version applied which this binary does not know (a newer idem applied
// it): only that binary may undo it, and undoing this binary's versions
// under it would leave it on a schema it was not written for.
var ErrSchemaNewer = errors.New("the schema has a version applied that this binary does not know (a newer idem migrated it)")

// migration is one numbered step: NNNN_name.up.sql and NNNN_name.down.sql.
type migration struct {
	Version int
	Name    string
	Up      migrationSQL
	Down    migrationSQL
}

// migrationSQL is one direction of a migration.
type migrationSQL struct {
	SQL string // the file
	// NoTx: the file has noTxMarker; Stmts are its statements, in order.
	NoTx  bool
	Stmts []string
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
		ms := migrationSQL{SQL: string(body)}
		if hasNoTxMarker(ms.SQL) {
			ms.NoTx = true
			if ms.Stmts, err = splitStatements(ms.SQL); err != nil {
				return nil, fmt.Errorf("migration %s: %w", name, err)
			}
		}
		if dir == "up" {
			m.Up = ms
		} else {
			m.Down = ms
		}
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up.SQL == "" || m.Down.SQL == "" {
			return nil, fmt.Errorf("migration %d: missing up or down file", m.Version)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// hasNoTxMarker reports whether a migration file has a line noTxMarker.
func hasNoTxMarker(body string) bool {
	for line := range strings.Lines(body) {
		if strings.TrimSpace(line) == noTxMarker {
			return true
		}
	}
	return false
}

// isCommentLine reports whether a line is blank or a "--" comment.
func isCommentLine(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || strings.HasPrefix(t, "--")
}

// splitStatements splits a no-transaction migration into its statements
// (the rule is in the comment of noTxMarker): each ends with a line ending
// in ";" that is not a comment, and holds no other ";" outside its comment
// lines. Comment lines after the last statement are dropped.
func splitStatements(body string) ([]string, error) {
	var out []string
	var cur strings.Builder
	code := false // cur has a line that is not a comment
	for line := range strings.Lines(body) {
		cur.WriteString(line)
		if isCommentLine(line) {
			continue
		}
		if strings.Contains(line, "--") || dollarQuote.MatchString(line) {
			return nil, fmt.Errorf("statement %d: a comment after code or dollar quoting (plain DDL only in a no-transaction migration): %q", len(out)+1, line)
		}
		code = true
		if !strings.HasSuffix(strings.TrimSpace(line), ";") {
			continue
		}
		stmt := cur.String()
		n := 0
		for l := range strings.Lines(stmt) {
			if !isCommentLine(l) {
				n += strings.Count(l, ";")
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("statement %d has a \";\" before its end (one statement per \";\"-terminated group of lines): %q", len(out)+1, stmt)
		}
		out = append(out, stmt)
		cur.Reset()
		code = false
	}
	if code {
		return nil, fmt.Errorf("statement %d does not end with a line ending in \";\": %q", len(out)+1, cur.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no statement")
	}
	return out, nil
}

// dollarQuote matches the opening of a dollar-quoted string ($$, $tag$),
// which splitStatements refuses.
var dollarQuote = regexp.MustCompile(`\$[A-Za-z_]*\$`)

// concurrently matches the keyword CONCURRENTLY of a statement building or
// dropping an index, after any comment lines before it.
var concurrently = regexp.MustCompile(`(?is)^((?:\s*--[^\n]*\n)*\s*(?:CREATE\s+(?:UNIQUE\s+)?INDEX|DROP\s+INDEX|REINDEX\s+(?:\([^)]*\)\s*)?(?:INDEX|TABLE|SCHEMA|DATABASE|SYSTEM)))\s+CONCURRENTLY\b`)

// inTransaction is a statement of a no-transaction migration as it runs in
// a transaction (a run that creates or drops the tables): without
// CONCURRENTLY.
func inTransaction(stmt string) string {
	return concurrently.ReplaceAllString(stmt, "$1")
}

// lockKey is the advisory lock key that serialises migrations of a schema.
func (s *Store) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("idem-migrate:" + s.schema))
	return int64(h.Sum64())
}

// lockWait is the lock_timeout of each attempt to take the migration lock
// (migrationSession). A process waiting for the lock holds a snapshot while
// it waits, and CREATE INDEX CONCURRENTLY waits, before it ends, for every
// transaction of the database holding a snapshot older than its own: had
// the waiter waited until the lock came free, the build of the process
// holding the lock would wait for the waiter and the waiter for it (the
// server's deadlock detection would then fail one of them, after
// deadlock_timeout, 1 s by default). A waiter whose attempt timed out
// tries again at once, so it still shows in pg_locks as waiting for the
// lock most of the time, and a build waits at most this long for it.
const lockWait = "100ms"

// migrationSession is migrationLock that then creates the schema and its
// migrations table if needed (a run that applies migrations).
func (s *Store) migrationSession(ctx context.Context) (conn *pgxpool.Conn, release func(), err error) {
	conn, release, err = s.migrationLock(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.Exec(ctx, s.sql(qMigrationsTable)); err != nil {
		release()
		return nil, nil, fmt.Errorf("migrate: create migrations table: %w", err)
	}
	return conn, release, nil
}

// migrationLock takes the schema's migration lock, the session-level
// advisory lock of lockKey, on a connection of the pool that it keeps for
// the run, and creates nothing. Every migration of the run runs on that
// connection. release unlocks the lock and gives the connection back
// (closing it when unlocking fails, so that the lock ends with the session
// and never stays with the pool).
func (s *Store) migrationLock(ctx context.Context) (conn *pgxpool.Conn, release func(), err error) {
	if s.closed.Load() {
		return nil, nil, store.ErrClosed
	}
	conn, err = s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("migrate: lock: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = conn.Conn().Close(ctx) // ends the session, and with it the lock
		conn.Release()
	}
	key := s.lockKey()
	if _, err := conn.Exec(ctx, `SELECT set_config('lock_timeout', $1, false)`, lockWait); err != nil {
		drop()
		return nil, nil, fmt.Errorf("migrate: lock: %w", err)
	}
	for {
		_, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
		if err == nil {
			break
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" || ctx.Err() != nil { // 55P03: lock_not_available
			drop()
			return nil, nil, fmt.Errorf("migrate: lock: %w", err)
		}
	}
	// The migrations run with the session's own lock_timeout.
	if _, err := conn.Exec(ctx, `RESET lock_timeout`); err != nil {
		drop()
		return nil, nil, fmt.Errorf("migrate: lock: %w", err)
	}
	release = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		var unlocked bool
		if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, key).Scan(&unlocked); err != nil || !unlocked {
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}
	return conn, release, nil
}

// appliedVersions reads the applied versions (under the migration lock).
func (s *Store) appliedVersions(ctx context.Context, q querier) (map[int]time.Time, error) {
	rows, err := q.Query(ctx, s.sql(qMigrationsApplied))
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

// migrationStep is one migration of a run, in one direction.
type migrationStep struct {
	m   migration
	sql migrationSQL
}

// runMigrations runs steps in order on conn (which holds the migration
// lock): consecutive transactional ones in one transaction, each
// no-transaction one on its own (see noTxMarker), or all in one
// transaction when oneTx (a run that creates or drops the tables). record
// writes a step's version into the migrations table (up) or deletes it
// (down), in the step's transaction or after its last statement. It
// returns the versions it ran; on an error those stay done.
func (s *Store) runMigrations(ctx context.Context, conn *pgxpool.Conn, steps []migrationStep, oneTx bool, verb string,
	record func(q querier, m migration) error) (done []int, err error) {
	for i := 0; i < len(steps); {
		st := steps[i]
		if st.sql.NoTx && !oneTx {
			if err := s.execStatements(ctx, conn, st, verb, false); err != nil {
				return done, err
			}
			if err := record(conn, st.m); err != nil {
				return done, err
			}
			done = append(done, st.m.Version)
			i++
			continue
		}
		j := i
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for j = i; j < len(steps) && (oneTx || !steps[j].sql.NoTx); j++ {
				st := steps[j]
				if st.sql.NoTx {
					if err := s.execStatements(ctx, tx, st, verb, true); err != nil {
						return err
					}
				} else if _, err := tx.Exec(ctx, s.sql(st.sql.SQL)); err != nil {
					return fmt.Errorf("migrate: %s %d_%s: %w", verb, st.m.Version, st.m.Name, err)
				}
				if err := record(tx, st.m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return done, err
		}
		for _, st := range steps[i:j] {
			done = append(done, st.m.Version)
		}
		i = j
	}
	return done, nil
}

// execStatements runs the statements of no-transaction step st on q, one
// at a time: on their own (each its own transaction), or inside q's
// transaction without CONCURRENTLY when inTx (inTransaction).
func (s *Store) execStatements(ctx context.Context, q querier, st migrationStep, verb string, inTx bool) error {
	where := " (no transaction)"
	if inTx {
		where = ""
	}
	for k, stmt := range st.sql.Stmts {
		if inTx {
			stmt = inTransaction(stmt)
		}
		if _, err := q.Exec(ctx, s.sql(stmt)); err != nil {
			return fmt.Errorf("migrate: %s %d_%s%s, statement %d: %w", verb, st.m.Version, st.m.Name, where, k+1, err)
		}
	}
	return nil
}

// Migrate brings the schema to the newest version under the schema's
// migration lock: several processes migrating at once wait for each other
// and the later ones find nothing to do. Transactional migrations run in
// one transaction, up to a no-transaction one (see noTxMarker), which runs
// on its own.
func (s *Store) Migrate(ctx context.Context) error {
	_, _, err := s.MigrateUp(ctx)
	return err
}

// MigrateUp is Migrate, reporting what this call did: from is the newest
// version applied before it (0 on a new schema) and applied the versions
// it applied itself, both read under the migration lock, so a process
// that waited for another's migration reports none. On an error, the
// versions applied before it (those of the transactions committed before
// the failing one, and the no-transaction migrations done) stay applied.
func (s *Store) MigrateUp(ctx context.Context) (from int, applied []int, err error) {
	return s.migrateUp(ctx, 0)
}

// migrateUp is MigrateUp applying the versions up to to only (all when
// to <= 0); tests stop a schema before a migration with it.
func (s *Store) migrateUp(ctx context.Context, to int) (from int, applied []int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, nil, err
	}
	if to <= 0 {
		if from, ok, err := s.upToDate(ctx, ms); err != nil || ok {
			return from, nil, err
		}
	}
	conn, release, err := s.migrationSession(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer release()
	done, err := s.appliedVersions(ctx, conn)
	if err != nil {
		return 0, nil, err
	}
	from = newestVersion(done)
	var steps []migrationStep
	for _, m := range ms {
		if _, ok := done[m.Version]; !ok && (to <= 0 || m.Version <= to) {
			steps = append(steps, migrationStep{m, m.Up})
		}
	}
	applied, err = s.runMigrations(ctx, conn, steps, len(done) == 0, "up", func(q querier, m migration) error {
		if _, err := q.Exec(ctx, s.sql(qMigrationsInsert), m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate: record %d: %w", m.Version, err)
		}
		return nil
	})
	return from, applied, err
}

// newestVersion is the highest version of applied (0 when none).
func newestVersion(applied map[int]time.Time) int {
	v := 0
	for a := range applied {
		v = max(v, a)
	}
	return v
}

// migrationsTableExists reports whether the schema's migrations table
// exists, creating nothing.
func (s *Store) migrationsTableExists(ctx context.Context) (bool, error) {
	return s.migrationsTableOn(ctx, s.pool)
}

// migrationsTableOn is migrationsTableExists read on q.
func (s *Store) migrationsTableOn(ctx context.Context, q querier) (bool, error) {
	var table bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.sql("{schema}.migrations")).Scan(&table); err != nil {
		return false, fmt.Errorf("migrate: read versions: %w", err)
	}
	return table, nil
}

// upToDate reports whether every migration of ms is applied, reading the
// migrations table without the migration lock, and the newest version
// applied. A node that starts on a current schema (the usual start) then
// takes no lock and holds no session: it does not wait behind another
// run, and a pool whose sessions are not its own (PgBouncer's transaction
// pooling) never sees the session-level lock. Versions are added only by
// a run holding the lock (and removed only by `idem migrate down`, an
// operator's step), so a schema read as current stays so; a newer
// binary's versions are ignored, as the locked path ignores them.
func (s *Store) upToDate(ctx context.Context, ms []migration) (from int, ok bool, err error) {
	if s.closed.Load() {
		return 0, false, store.ErrClosed
	}
	table, err := s.migrationsTableExists(ctx)
	if err != nil || !table {
		return 0, false, err
	}
	done, err := s.appliedVersions(ctx, s.pool)
	if err != nil {
		return 0, false, err
	}
	for _, m := range ms {
		if _, ok := done[m.Version]; !ok {
			return 0, false, nil
		}
	}
	return newestVersion(done), true, nil
}

// MigrateDown undoes the newest steps applied migrations (all when steps
// <= 0) under the migration lock, transactional ones in one transaction
// up to a no-transaction one, as Migrate. On a schema with a version
// applied that this binary does not know it undoes nothing and returns
// ErrSchemaNewer. On a schema that does not exist, or has no migrations
// table, it undoes nothing and creates nothing.
func (s *Store) MigrateDown(ctx context.Context, steps int) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	conn, release, err := s.migrationLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	// Read under the lock: a run that creates the table holds it.
	if table, err := s.migrationsTableOn(ctx, conn); err != nil || !table {
		return err
	}
	applied, err := s.appliedVersions(ctx, conn)
	if err != nil {
		return err
	}
	known := make(map[int]bool, len(ms))
	for _, m := range ms {
		known[m.Version] = true
	}
	for v := range applied {
		if !known[v] {
			return fmt.Errorf("migrate: down: version %d: %w", v, ErrSchemaNewer)
		}
	}
	var undo []migrationStep
	for i := len(ms) - 1; i >= 0 && (steps <= 0 || len(undo) < steps); i-- {
		if _, ok := applied[ms[i].Version]; ok {
			undo = append(undo, migrationStep{ms[i], ms[i].Down})
		}
	}
	// Undoing the first migration drops the tables: one transaction.
	dropsTables := len(undo) > 0 && undo[len(undo)-1].m.Version == ms[0].Version
	_, err = s.runMigrations(ctx, conn, undo, dropsTables, "down", func(q querier, m migration) error {
		if _, err := q.Exec(ctx, s.sql(qMigrationsDelete), m.Version); err != nil {
			return fmt.Errorf("migrate: unrecord %d: %w", m.Version, err)
		}
		return nil
	})
	return err
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
	table, err := s.migrationsTableExists(ctx)
	if err != nil {
		return nil, err
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
