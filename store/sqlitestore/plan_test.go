package sqlitestore

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// TestListPlansUseIndexes: every documented list filter is served by its
// index (EXPLAIN QUERY PLAN of the JobList query), never a scan of the
// tenant's jobs. A plan assert, not a timing assert.
func TestListPlansUseIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	storetest.SeedListPlans(t, s)
	storetest.CheckListPlans(t, func(f store.JobFilter) (string, error) {
		return s.explainJobList(t, f)
	}, "SCAN jobs")
}

// explainJobList returns the plan of the JobList query of f, one line per step.
func (s *Store) explainJobList(t *testing.T, f store.JobFilter) (string, error) {
	q, args := jobListSQL(&store.JobListParams{Filter: f}, store.MaxListLimit)
	rows, err := s.rdb.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// TestKindStatsPlanUsesIndexes: the per-kind summary (JobKindStats) reads
// every branch through a partial index (finished jobs by finish time,
// claimable, running (jobs_running_lease or _scope) and pending jobs by
// theirs), never a scan of the jobs
// table, with or without a tenant.
func TestKindStatsPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	storetest.SeedListPlans(t, s)
	for _, tenant := range []string{"", "t1"} {
		rows, err := s.rdb.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+qJobKindStats, tenant, int64(0), int64(0))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, detail)
		}
		rows.Close()
		plan := strings.Join(lines, "\n")
		t.Logf("tenant %q:\n%s", tenant, plan)
		for _, idx := range []string{"jobs_finished", "jobs_claim_tenant", "jobs_running", "jobs_pending"} {
			if !strings.Contains(plan, "INDEX "+idx) {
				t.Errorf("tenant %q: the plan does not use %s:\n%s", tenant, idx, plan)
			}
		}
		if strings.Contains(plan, "SCAN jobs\n") || strings.HasSuffix(plan, "SCAN jobs") {
			t.Errorf("tenant %q: the plan scans the jobs table:\n%s", tenant, plan)
		}
	}
}
