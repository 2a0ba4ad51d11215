package pgstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/storetest"
)

// fullCatalog is catalog with what it leaves out: every relation of the
// schema by kind (tables, sequences, views), the columns' collations and
// identity, and the schema's functions, so that a down step leaving a
// table, sequence or function behind shows.
func fullCatalog(t *testing.T, s *Store) string {
	t.Helper()
	var extra string
	err := s.pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(line, E'\n' ORDER BY line), '') FROM (
    SELECT format('relation %s %s', c.relname, c.relkind) AS line FROM pg_class c
        WHERE c.relnamespace = to_regnamespace($1) AND c.relkind <> 'i'
    UNION ALL
    SELECT format('column-extra %s %s collation %s identity %s generated %s', c.relname, a.attname,
            a.attcollation::regcollation, a.attidentity, a.attgenerated)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relnamespace = to_regnamespace($1) AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('function %s', pg_get_functiondef(p.oid)) FROM pg_proc p
        WHERE p.pronamespace = to_regnamespace($1)
    UNION ALL
    SELECT format('sequence %s %s %s %s', c.relname, q.seqtypid::regtype, q.seqincrement, q.seqcycle)
        FROM pg_sequence q JOIN pg_class c ON c.oid = q.seqrelid WHERE c.relnamespace = to_regnamespace($1)
) x`, s.schema).Scan(&extra)
	if err != nil {
		t.Fatal(err)
	}
	base := ""
	if has, err := s.migrationsTableExists(t.Context()); err != nil {
		t.Fatal(err)
	} else if has {
		base = catalog(t, s)
	}
	return base + "\n" + replaceSchema(extra, s.schema)
}

// TestMigrateEveryDownUndoesItsUp walks every version N: the schema taken
// up one version at a time is described at each N, then taken down one
// version at a time, and at each N it must match what it was on the way
// up (tables, columns with types, defaults, nullability and collations,
// indexes with their predicates and validity, constraints, table options,
// triggers, sequences, functions): every down step undoes its up step,
// and going up k versions then down k gives back the schema at N.
func TestMigrateEveryDownUndoesItsUp(t *testing.T) {
	t.Parallel()
	// A database of its own, as TestMigrateNoTxRerunAfterEveryStatement's:
	// its CREATE INDEX CONCURRENTLY statements wait for no other test.
	url, schema := dbtest.NewDatabase(t, ""), "idem_roundtrip"
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
	// Version 0: the migrations table only (what a down of every version
	// leaves).
	_, release, err := s.migrationSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release()
	// at[i]: the schema with the first i migrations applied.
	at := []string{fullCatalog(t, s)}
	for _, m := range ms {
		if _, _, err := s.migrateUp(ctx, m.Version); err != nil {
			t.Fatalf("up to %d: %v", m.Version, err)
		}
		at = append(at, fullCatalog(t, s))
	}
	for i := len(ms) - 1; i >= 0; i-- {
		from, to := ms[i].Version, 0
		if i > 0 {
			to = ms[i-1].Version
		}
		if err := s.MigrateDown(ctx, 1); err != nil {
			t.Fatalf("down from %d to %d: %v", from, to, err)
		}
		if got := fullCatalog(t, s); got != at[i] {
			t.Errorf("down from %d to %d: the schema differs from the one at %d:\n%s", from, to, to, diffLines(at[i], got))
		}
	}
}

// replaceSchema writes the schema's name as SCHEMA.
func replaceSchema(s, schema string) string {
	return strings.ReplaceAll(s, schema, "SCHEMA")
}

// diffLines lists the lines only in want (-) and only in got (+).
func diffLines(want, got string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var out []string
	for l, n := range w {
		if g[l] < n {
			out = append(out, fmt.Sprintf("- %s", l))
		}
	}
	for l, n := range g {
		if w[l] < n {
			out = append(out, fmt.Sprintf("+ %s", l))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestMigrateDownRefusesNewerSchema: on a schema a newer binary migrated
// (a version applied that this binary does not know), MigrateDown refuses
// (ErrSchemaNewer) and changes nothing: undoing this binary's newest
// versions under the newer one's would leave that one applied on a schema
// it was not written for, with no way back (only the newer binary can
// undo it, and its down step would then run on the wrong schema).
func TestMigrateDownRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 2)
	ctx := t.Context()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].Version
	if _, err := s.pool.Exec(ctx, s.sql(qMigrationsInsert), newest+1, "from_a_newer_binary"); err != nil {
		t.Fatal(err)
	}
	before := fullCatalog(t, s)
	if err := s.MigrateDown(ctx, 1); !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("MigrateDown(1) on a schema at %d (this binary: %d): %v, want ErrSchemaNewer", newest+1, newest, err)
	}
	if got := fullCatalog(t, s); got != before {
		t.Fatalf("a refused MigrateDown changed the schema:\n%s", diffLines(before, got))
	}
	if applied, _, err := s.SchemaVersion(ctx); err != nil || applied != newest+1 {
		t.Fatalf("schema version after a refused MigrateDown: %d, %v", applied, err)
	}
	st, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st {
		if !m.Applied {
			t.Fatalf("version %d unapplied by a refused MigrateDown", m.Version)
		}
	}
}

// TestMigrateDownWithRows: on a schema holding jobs (completed, running,
// waiting in a FIFO partition), records, a schedule, a delivery target and
// a limit, every down step succeeds, one at a time, down to version 1; the
// jobs and records, whose tables version 1 has, are all there after it and
// after migrating up again, which gives the newest schema back; then down
// to 0 and up again succeed too.
func TestMigrateDownWithRows(t *testing.T) {
	t.Parallel()
	want := fullCatalog(t, newTestStore(t, 2))
	s, _ := newOwnDatabaseStore(t, 3, true) // see newOwnDatabaseStore
	ctx := t.Context()
	storetest.SeedEveryTable(t, s)
	count := func(table string) int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM {schema}.`+table)).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		return n
	}
	jobs, records := count("jobs"), count("records")
	// The completed jobs' durations (a derived record takes its job's),
	// which 0014's down step keeps in attempt rows.
	durations := func() string {
		t.Helper()
		var d string
		if err := s.pool.QueryRow(ctx, s.sql(`SELECT coalesce(string_agg(id || ':' || duration_ms, ',' ORDER BY id), '')
            FROM {schema}.jobs WHERE state = 'completed'`)).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	wantDurations := durations()
	if wantDurations == "" || strings.HasSuffix(wantDurations, ":0") {
		t.Fatalf("the seed's completed jobs and their durations: %q, want one with a duration", wantDurations)
	}
	for _, table := range []string{"schedules", "delivery_targets", "flow_controls"} {
		if count(table) == 0 {
			t.Fatalf("the seed wrote no row into %s", table)
		}
	}
	for n := stepsAbove(t, 1); n > 0; n-- {
		if err := s.MigrateDown(ctx, 1); err != nil {
			t.Fatalf("down one step (%d above version 1) with rows: %v", n, err)
		}
	}
	if j, r := count("jobs"), count("records"); j != jobs || r != records {
		t.Fatalf("at version 1: %d jobs and %d records, want %d and %d", j, r, jobs, records)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("up again with rows: %v", err)
	}
	if j, r := count("jobs"), count("records"); j != jobs || r != records {
		t.Fatalf("migrated up again: %d jobs and %d records, want %d and %d", j, r, jobs, records)
	}
	if d := durations(); d != wantDurations {
		t.Fatalf("migrated up again: the completed jobs' durations are %q, want %q", d, wantDurations)
	}
	if got := fullCatalog(t, s); got != want {
		t.Fatalf("migrated up again with rows: the schema differs from a new one:\n%s", diffLines(want, got))
	}
	if err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatalf("down to 0 with rows: %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("up from 0: %v", err)
	}
}
