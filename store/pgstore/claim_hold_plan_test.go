package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/storetest"
)

// TestClaimPlanHeadRuleUsesPartitionIndex: the FIFO head rule, which
// counts cancelled jobs still holding their partition (migration 0026),
// reads jobs_partition_idx (its predicate proved from the rule's) and never
// scans the jobs table, with most of the history finished as on a server
// and some cancelled holds. A plan assert (EXPLAIN after ANALYZE), not a
// timing one.
func TestClaimPlanHeadRuleUsesPartitionIndex(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s := newTestStore(t, 4)
	storetest.SeedListPlans(t, s)
	ctx := t.Context()
	for _, q := range []string{
		`UPDATE {schema}.jobs SET state = 'completed', attempt = 1, started_at = created_at,
    finished_at = created_at + interval '1 second' WHERE id % 20 <> 0`,
		`UPDATE {schema}.jobs SET state = 'cancelled', finished_at = created_at, lease_token = 'held',
    lease_expires_at = created_at + interval '1 hour' WHERE id % 400 = 0 AND partition_key <> ''`,
		`ANALYZE {schema}.jobs`,
	} {
		if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
			t.Fatal(err)
		}
	}
	tenants := make([]string, 20)
	ns := make([]int32, 20)
	for i := range tenants {
		tenants[i], ns[i] = "t"+string(rune('a'+i)), 1
	}
	tenants[0] = "t1"
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	rows, err := s.pool.Query(ctx, "EXPLAIN "+s.sql(qClaimFair), "q3", tenants, ns, now, nil,
		now.Add(time.Minute), "w1", "tok")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	t.Logf("claim plan:\n%s", plan)
	if !strings.Contains(plan, "jobs_partition_idx on jobs h") {
		t.Errorf("the head rule does not read jobs_partition_idx")
	}
	if strings.Contains(plan, "Seq Scan") {
		t.Errorf("the claim scans a table")
	}
}
