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
