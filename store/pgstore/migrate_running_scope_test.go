package pgstore

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateRunningScopeHolds: the down steps of 0029 and 0028 give back
// the indexes of 0027 (jobs_lease_idx, jobs_running_scope_idx of running
// jobs only, jobs_cancel_hold_idx), and the up steps take the cancelled
// jobs still holding their partition into the scope index (0028) and merge
// the three into jobs_running_idx (0029).
func TestMigrateRunningScopeHolds(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s := newTestStore(t, 2)
	ctx := t.Context()
	def := func(name string) string {
		t.Helper()
		var d *string
		if err := s.pool.QueryRow(ctx, `SELECT pg_get_indexdef(to_regclass($1))`, s.sql("{schema}."+name)).Scan(&d); err != nil {
			t.Fatal(err)
		}
		if d == nil {
			return ""
		}
		return *d
	}
	const hold = "(state = 'cancelled'::text) AND (lease_expires_at IS NOT NULL)"
	newest := func(when string) {
		t.Helper()
		if d := def("jobs_running_idx"); !strings.Contains(d, hold) || !strings.Contains(d, "(tenant, queue, lease_expires_at)") {
			t.Fatalf("jobs_running_idx %s: %q", when, d)
		}
		for _, old := range []string{"jobs_lease_idx", "jobs_running_scope_idx", "jobs_cancel_hold_idx"} {
			if d := def(old); d != "" {
				t.Fatalf("%s %s: %s", old, when, d)
			}
		}
	}
	newest("at the newest version")
	if err := s.MigrateDown(ctx, stepsAbove(t, 27)); err != nil { // undo 0029, 0028 and every later one
		t.Fatal(err)
	}
	if d := def("jobs_running_scope_idx"); strings.Contains(d, "cancelled") || !strings.Contains(d, "WHERE (state = 'running'::text)") {
		t.Fatalf("jobs_running_scope_idx after 0028's down step: %s", d)
	}
	if def("jobs_running_idx") != "" || def("jobs_lease_idx") == "" || def("jobs_cancel_hold_idx") == "" {
		t.Fatalf("after 0029's down step: jobs_running_idx %q, jobs_lease_idx %q, jobs_cancel_hold_idx %q",
			def("jobs_running_idx"), def("jobs_lease_idx"), def("jobs_cancel_hold_idx"))
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	newest("migrated again")
}
