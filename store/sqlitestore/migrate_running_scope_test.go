package sqlitestore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/store/storetest"
)

// TestMigrateRunningScopeHolds: a file at 0027, with the three indexes of
// running and holding jobs of that version (jobs_running_lease,
// jobs_running_scope of running jobs only, jobs_cancel_hold), is migrated:
// 0028 takes the cancelled jobs still holding their partition into the
// scope index and 0029 merges the three into jobs_running, whose predicate
// holds both (and 0030 the retried holding jobs), and which the running
// counts of concurrency limits read (with the old scope predicate their
// WHERE, which counts the holds, no longer implied it).
func TestMigrateRunningScopeHolds(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	s.execAll(t,
		`DROP INDEX jobs_running`,
		`CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE state = 'running'`,
		`CREATE INDEX jobs_running_scope ON jobs (tenant, queue) WHERE state = 'running'`,
		`CREATE INDEX jobs_cancel_hold ON jobs (lease_expires_at) WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL`,
		`DELETE FROM schema_migrations WHERE version IN (28, 29, 30)`,
	)
	if plan := s.explain(t, qRunningTenant, "t1", "", 1); strings.Contains(plan, "INDEX jobs_running") {
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
	if plan := s.explain(t, qRunningTenant, "t1", "", 1); !usesIndex(plan, "jobs_running") {
		t.Errorf("the count does not read jobs_running after 0029:\n%s", plan)
	}
}

// TestMigrateRetriedHolds: a file at 0029, whose jobs_running holds the
// running and the cancelled holding jobs, with a holding job retried (it
// waits to run again with its old lease end), is migrated: 0030 takes the
// retried holding jobs into jobs_running, which the running counts of
// concurrency limits read again (their WHERE, which counts the retried
// holds until their old lease ends, no longer implied the 0029
// predicate), and the retried job counts in its scope until its old lease
// ends.
func TestMigrateRetriedHolds(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	end := storetest.RetriedHold(t, s, now)
	s.execAll(t,
		`DROP INDEX jobs_running`,
		`CREATE INDEX jobs_running ON jobs (tenant, queue, lease_expires_at)
    WHERE (state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL))`,
		`DELETE FROM schema_migrations WHERE version = 30`,
	)
	if plan := s.explain(t, qRunningTenant, "t1", "", 1); strings.Contains(plan, "INDEX jobs_running") {
		t.Fatalf("the count reads jobs_running before 0030, whose predicate leaves the retried holds out:\n%s", plan)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var def string
	if err := s.rdb.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'jobs_running'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "state = 'available') AND lease_expires_at IS NOT NULL") {
		t.Errorf("jobs_running after 0030: %s", def)
	}
	for _, q := range []string{qRunningTenant, qRunningTenantQueue, qRunningQueue} {
		if plan := s.explain(t, q, "t1", "q", 1); !usesIndex(plan, "jobs_running") {
			t.Errorf("the count does not read jobs_running after 0030:\n%s", plan)
		}
	}
	// The retried job counts, on the index, until its old lease ends.
	for _, c := range []struct {
		at   time.Time
		want int
	}{{end.Add(-time.Second), 1}, {end, 0}} {
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM jobs INDEXED BY jobs_running WHERE `+sqlSlotTaken("?1"),
			toUS(c.at)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("jobs taking a slot at %v: %d, want %d", c.at, n, c.want)
		}
	}
}

// execAll runs the statements in one write transaction (a schema put back
// as an older version left it).
func (s *Store) execAll(t *testing.T, stmts ...string) {
	t.Helper()
	err := s.write(t.Context(), 1, func(w *wtx) error {
		for _, q := range stmts {
			if _, err := w.exec(q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
