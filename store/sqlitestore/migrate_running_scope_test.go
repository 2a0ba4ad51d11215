package sqlitestore

import (
	"context"
	"strings"
	"testing"
)

// TestMigrateRunningScopeHolds: a file whose jobs_running_scope still has
// the predicate before 0028 (running jobs only) is migrated: the index
// takes the cancelled jobs still holding their partition in, and the
// running counts of concurrency limits read it again (with the old
// predicate their WHERE, which counts the holds, no longer implies it).
func TestMigrateRunningScopeHolds(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	err := s.write(ctx, 1, func(w *wtx) error {
		for _, q := range []string{
			`DROP INDEX jobs_running_scope`,
			`CREATE INDEX jobs_running_scope ON jobs (tenant, queue) WHERE state = 'running'`,
			`DELETE FROM schema_migrations WHERE version = 28`,
		} {
			if _, err := w.exec(q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if plan := s.explain(t, qRunningTenant, "t1"); strings.Contains(plan, "INDEX jobs_running_scope") {
		t.Fatalf("the count reads the index of running jobs only before 0028:\n%s", plan)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var def string
	if err := s.rdb.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'jobs_running_scope'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "state = 'cancelled' AND lease_expires_at IS NOT NULL") {
		t.Errorf("jobs_running_scope after 0028: %s", def)
	}
	if plan := s.explain(t, qRunningTenant, "t1"); !strings.Contains(plan, "INDEX jobs_running_scope") {
		t.Errorf("the count does not read jobs_running_scope after 0028:\n%s", plan)
	}
}
