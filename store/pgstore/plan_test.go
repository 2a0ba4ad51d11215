package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// TestListPlansUseIndexes: every documented list filter is served by its
// index (EXPLAIN of the JobList query with statistics), never a sequential
// scan. A plan assert, not a timing assert.
func TestListPlansUseIndexes(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s := newTestStore(t, 4)
	storetest.SeedListPlans(t, s)
	if _, err := s.pool.Exec(t.Context(), s.sql("ANALYZE {schema}.jobs")); err != nil {
		t.Fatal(err)
	}
	storetest.CheckListPlans(t, func(f store.JobFilter) (string, error) {
		return s.explainJobList(t, f)
	}, "Seq Scan")
}

// explainJobList returns the plan of the JobList query of f.
func (s *Store) explainJobList(t *testing.T, f store.JobFilter) (string, error) {
	where, args := jobFilterSQL(&f, 3)
	return s.explain(t.Context(), qJobList(where), append([]any{int64(0), store.MaxListLimit + 1}, args...)...)
}

// explain returns the plan (EXPLAIN, one line a row) of the query q, its
// {schema} filled in, with args.
func (s *Store) explain(ctx context.Context, q string, args ...any) (string, error) {
	rows, err := s.pool.Query(ctx, "EXPLAIN "+s.sql(q), args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// TestKindStatsPlanUsesIndexes: the per-kind summary (JobKindStats) reads
// each branch through a partial index (finished jobs by finish time,
// available (jobs_claim_tenant_idx), waiting for their run_at (jobs_due_idx),
// running and pending jobs by theirs) once most of the history
// is finished, as on a server, never a sequential scan of the jobs, with or
// without a tenant. A plan assert (EXPLAIN after ANALYZE), not a timing one.
func TestKindStatsPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s := newTestStore(t, 4)
	storetest.SeedListPlans(t, s)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {schema}.jobs SET created_at = timestamptz '2031-01-01 00:00:00+00' + id * interval '1 minute'`)); err != nil {
		t.Fatal(err)
	}
	// Three days of history, one job a minute; one in a hundred unfinished.
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {schema}.jobs SET state = 'completed', attempt = 1,
    started_at = created_at, finished_at = created_at + interval '1 second' WHERE id % 100 <> 0`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql("ANALYZE {schema}.jobs")); err != nil {
		t.Fatal(err)
	}
	var newest time.Time
	if err := s.pool.QueryRow(ctx, s.sql("SELECT max(created_at) FROM {schema}.jobs")).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"", "t1"} {
		plan, err := s.explain(ctx, qJobKindStats, tenant, newest.Add(-10*time.Minute), newest.Add(-10*time.Minute-store.KindStatsSkew))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("tenant %q:\n%s", tenant, plan)
		for _, idx := range []string{"jobs_finished_idx", "jobs_claim_tenant_idx", "jobs_due_idx", "jobs_pending_idx"} {
			if !strings.Contains(plan, idx) {
				t.Errorf("tenant %q: the plan does not use %s", tenant, idx)
			}
		}
		if !strings.Contains(plan, "jobs_lease_idx") && !strings.Contains(plan, "jobs_running_scope_idx") {
			t.Errorf("tenant %q: the plan reads running jobs through no index", tenant)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("tenant %q: the plan scans the jobs table", tenant)
		}
	}
}

// TestRepairPlanUsesPendingIndex: the repair of missed releases
// (JobDependantsRepair) finds its candidates through jobs_pending_idx from
// its cursor on and their dependencies by primary key, never a sequential
// scan of the jobs, when most of the history is finished; a plan assert
// (EXPLAIN after ANALYZE), not a timing one.
func TestRepairPlanUsesPendingIndex(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s := newTestStore(t, 4)
	storetest.SeedListPlans(t, s)
	ctx := t.Context()
	// One job in a hundred pending (waiting for the one before it), the
	// others finished.
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {schema}.jobs SET state = 'completed', attempt = 1,
    started_at = created_at, finished_at = created_at + interval '1 second' WHERE id % 100 <> 0`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {schema}.jobs SET state = 'pending', depends_on = ARRAY[id - 1]
    WHERE id % 100 = 0`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql("ANALYZE {schema}.jobs")); err != nil {
		t.Fatal(err)
	}
	var newest time.Time
	if err := s.pool.QueryRow(ctx, s.sql("SELECT max(created_at) FROM {schema}.jobs")).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	for _, after := range []store.DependantsCursor{{}, {CreatedAt: newest.Add(-time.Hour), ID: 1}} {
		plan, err := s.explain(ctx, qRepairCandidates, newest, after.CreatedAt, after.ID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("after %+v:\n%s", after, plan)
		if !strings.Contains(plan, "jobs_pending_idx") {
			t.Errorf("after %+v: the plan does not use jobs_pending_idx", after)
		}
		if !strings.Contains(plan, "jobs_pkey") {
			t.Errorf("after %+v: the plan does not read the dependencies by primary key", after)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("after %+v: the plan scans the jobs table", after)
		}
	}
	res, err := s.JobDependantsRepair(ctx, &store.JobDependantsRepairParams{Now: newest.Add(time.Hour),
		CreatedBefore: newest.Add(time.Hour), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Released) == 0 {
		t.Errorf("the repair released none of the pending jobs whose dependency completed")
	}
}
