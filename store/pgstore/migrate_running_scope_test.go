package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/storetest"
	"github.com/jackc/pgx/v5"
)

// TestMigrateRunningScopeHolds: 0028's down step gives jobs_running_scope_idx
// back its predicate of running jobs only, and its up step takes the
// cancelled jobs still holding their partition in again.
func TestMigrateRunningScopeHolds(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s, _ := newOwnDatabaseStore(t, 2, true)
	ctx := t.Context()
	def := func() string { return s.scopeIndexDef(t) }
	const hold = "(state = 'cancelled'::text) AND (lease_expires_at IS NOT NULL)"
	if d := def(); !strings.Contains(d, hold) {
		t.Fatalf("jobs_running_scope_idx at the newest version: %s", d)
	}
	if err := s.MigrateDown(ctx, stepsAbove(t, 27)); err != nil { // undo 0028 and every later one
		t.Fatal(err)
	}
	if d := def(); strings.Contains(d, "cancelled") || !strings.Contains(d, "WHERE (state = 'running'::text)") {
		t.Fatalf("jobs_running_scope_idx after 0028's down step: %s", d)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if d := def(); !strings.Contains(d, hold) {
		t.Fatalf("jobs_running_scope_idx migrated again: %s", d)
	}
}

// TestMigrateRetriedHolds: 0030's down step gives jobs_running_scope_idx
// back 0028's predicate (running and cancelled holding jobs), and its up
// step takes the retried holding jobs in too (waiting, with the end of
// their old lease), which the running counts then read through the index:
// a holding job retried counts until its old lease ends.
func TestMigrateRetriedHolds(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s, _ := newOwnDatabaseStore(t, 2, true)
	ctx := t.Context()
	def := func() string { return s.scopeIndexDef(t) }
	const hold = "(state = 'cancelled'::text) AND (lease_expires_at IS NOT NULL)"
	const retried = "(state = ANY (ARRAY['pending'::text, 'scheduled'::text, 'available'::text])) AND (lease_expires_at IS NOT NULL)"
	if d := def(); !strings.Contains(d, hold) || !strings.Contains(d, retried) {
		t.Fatalf("jobs_running_scope_idx at the newest version: %s", d)
	}
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	end := storetest.RetriedHold(t, s, now)
	if err := s.MigrateDown(ctx, stepsAbove(t, 29)); err != nil { // undo 0030
		t.Fatal(err)
	}
	if d := def(); !strings.Contains(d, hold) || strings.Contains(d, "available") {
		t.Fatalf("jobs_running_scope_idx after 0030's down step: %s", d)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if d := def(); !strings.Contains(d, retried) {
		t.Fatalf("jobs_running_scope_idx migrated again: %s", d)
	}
	// The count reads the index (sequential scans off: the table is
	// small) and finds the retried job until its old lease ends.
	count := func(at time.Time) (n int, plan string) {
		t.Helper()
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "EXPLAIN "+s.sql(qRunningScopes), at)
			if err != nil {
				return err
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			plan = strings.Join(lines, "\n")
			rs, err := scanRunning(tx.Query(ctx, s.sql(qRunningScopes), at))
			for _, r := range rs {
				n += r.N
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, plan
	}
	if n, plan := count(end.Add(-time.Second)); n != 1 || !strings.Contains(plan, "jobs_running_scope_idx") {
		t.Errorf("before the old lease ends: %d jobs take a slot, want 1 (through jobs_running_scope_idx):\n%s", n, plan)
	}
	if n, _ := count(end); n != 0 {
		t.Errorf("once the old lease ended: %d jobs take a slot, want 0", n)
	}
}

// scopeIndexDef returns the definition of jobs_running_scope_idx.
func (s *Store) scopeIndexDef(t *testing.T) string {
	t.Helper()
	var d string
	if err := s.pool.QueryRow(t.Context(), `SELECT pg_get_indexdef(to_regclass($1))`, s.sql("{schema}.jobs_running_scope_idx")).Scan(&d); err != nil {
		t.Fatal(err)
	}
	return d
}
