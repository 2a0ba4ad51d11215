package sqlitestore

import (
	"context"
	"strings"
	"testing"
)

// TestMigrateRunningScopeHolds: a file at 0027, with the three indexes of
// running and holding jobs of that version (jobs_running_lease,
// jobs_running_scope of running jobs only, jobs_cancel_hold), is migrated:
// 0028 takes the cancelled jobs still holding their partition into the
// scope index and 0029 merges the three into jobs_running, whose predicate
// holds both, and which the running counts of concurrency limits read
// (with the old scope predicate their WHERE, which counts the holds, no
// longer implied it).
func TestMigrateRunningScopeHolds(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	err := s.write(ctx, 1, func(w *wtx) error {
		for _, q := range []string{
			`DROP INDEX jobs_running`,
			`CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE state = 'running'`,
			`CREATE INDEX jobs_running_scope ON jobs (tenant, queue) WHERE state = 'running'`,
			`CREATE INDEX jobs_cancel_hold ON jobs (lease_expires_at) WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL`,
			`DELETE FROM schema_migrations WHERE version IN (28, 29)`,
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
	if plan := s.explain(t, qRunningTenant, "t1"); strings.Contains(plan, "INDEX jobs_running") {
		t.Fatalf("the count reads an index of running jobs only before 0028:\n%s", plan)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	indexes := map[string]string{}
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'jobs_running%' OR name = 'jobs_cancel_hold'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		indexes[name] = def
	}
	rows.Close()
	if len(indexes) != 1 || !strings.Contains(indexes["jobs_running"], "state = 'cancelled' AND lease_expires_at IS NOT NULL") {
		t.Errorf("indexes of running jobs after 0029: %v", indexes)
	}
	if plan := s.explain(t, qRunningTenant, "t1"); !usesIndex(plan, "jobs_running") {
		t.Errorf("the count does not read jobs_running after 0029:\n%s", plan)
	}
}
