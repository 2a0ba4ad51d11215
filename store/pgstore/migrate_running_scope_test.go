package pgstore

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateRunningScopeHolds: 0028's down step gives jobs_running_scope_idx
// back its predicate of running jobs only, and its up step takes the
// cancelled jobs still holding their partition in again.
func TestMigrateRunningScopeHolds(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s := newTestStore(t, 2)
	ctx := t.Context()
	def := func() string {
		t.Helper()
		var d string
		if err := s.pool.QueryRow(ctx, `SELECT pg_get_indexdef(to_regclass($1))`, s.sql("{schema}.jobs_running_scope_idx")).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
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
