package pgstore

import (
	"strings"
	"testing"

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
	rows, err := s.pool.Query(t.Context(), "EXPLAIN "+s.sql(qJobList(where)),
		append([]any{int64(0), store.MaxListLimit + 1}, args...)...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"), rows.Err()
}
