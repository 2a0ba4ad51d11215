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
	s := holdHistory(t)
	ctx := t.Context()
	tenants := make([]string, 20)
	ns := make([]int32, 20)
	for i := range tenants {
		tenants[i], ns[i] = "t"+string(rune('a'+i)), 1
	}
	tenants[0] = "t1"
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	plan, err := s.explain(ctx, qClaimFair, "q3", tenants, ns, now, nil, now.Add(time.Minute), "w1", "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim plan:\n%s", plan)
	if !strings.Contains(plan, "jobs_partition_idx on jobs h") {
		t.Errorf("the head rule does not read jobs_partition_idx")
	}
	if strings.Contains(plan, "Seq Scan") {
		t.Errorf("the claim scans a table")
	}
}

// TestRunningCountPlansUseScopeIndex: the running counts of concurrency
// limits, which count cancelled jobs still holding their partition
// (sqlSlotTaken, migration 0028) and retried ones until their old lease
// ends (0030), read jobs_running_scope_idx (its predicate proved from
// theirs) and never scan the jobs table: the general claim's count
// (qRunningOfClaim), LimitList's (qRunningScopes), the one-round claim's
// counts per scope (qClaimOneLimited) and the reserved claim's (runningOf,
// and the per-tenant count of its bound), with most of the history
// finished as on a server, some jobs running, some holds and some retried
// holds. A plan assert (EXPLAIN after ANALYZE), not a timing one.
func TestRunningCountPlansUseScopeIndex(t *testing.T) {
	t.Parallel()
	s := holdHistory(t,
		`UPDATE {schema}.jobs SET state = 'running', attempt = 1, started_at = created_at, lease_token = 'run',
    lease_expires_at = created_at + interval '1 hour' WHERE id % 40 = 0 AND lease_token IS DISTINCT FROM 'held'`,
		`UPDATE {schema}.jobs SET state = 'scheduled', run_at = created_at + interval '1 hour',
    lease_expires_at = created_at + interval '1 hour' WHERE id % 400 = 20 AND partition_key <> ''`,
		`INSERT INTO {schema}.flow_controls (tenant, queue, concurrency) VALUES ('', 'q3', 5), ('t1', '', 5), ('*', 'q3', 2)`)
	ctx := t.Context()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		q    string
		args []any
	}{
		{"general claim", qRunningOfClaim, []any{[]string{"q3"}, now}},
		{"LimitList", qRunningScopes, []any{now}},
		{"one-round claim", qClaimOneLimited, []any{"q3", now, "", nil, 1, now.Add(time.Minute), "w1", "", "", "tok"}},
		{"reserved claim's scope count", `SELECT ` + runningOf("q") + ` FROM {schema}.flow_controls q WHERE q.queue <> $1`,
			[]any{"", now}},
		{"reserved claim's bound", `SELECT max(n) FROM (SELECT count(*) AS n FROM {schema}.jobs r WHERE ` + sqlSlotTaken("$1::timestamptz") +
			` GROUP BY r.tenant) z`, []any{now}},
	} {
		plan, err := s.explain(ctx, c.q, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s:\n%s", c.name, plan)
		if !strings.Contains(plan, "jobs_running_scope_idx") {
			t.Errorf("%s: the running count does not read jobs_running_scope_idx", c.name)
		}
		if strings.Contains(plan, "Seq Scan on jobs") {
			t.Errorf("%s: the plan scans the jobs table", c.name)
		}
	}
}

// holdHistory is a store seeded for plan tests (storetest.SeedListPlans)
// with most of the history finished, as on a server, and some cancelled
// jobs holding their partitions, then more statements (with {schema}),
// then ANALYZE.
func holdHistory(t *testing.T, more ...string) *Store {
	t.Helper()
	dbtest.PostgresURL(t)
	s := newTestStore(t, 4)
	storetest.SeedListPlans(t, s)
	for _, q := range append(append([]string{
		`UPDATE {schema}.jobs SET state = 'completed', attempt = 1, started_at = created_at,
    finished_at = created_at + interval '1 second' WHERE id % 20 <> 0`,
		`UPDATE {schema}.jobs SET state = 'cancelled', finished_at = created_at, lease_token = 'held',
    lease_expires_at = created_at + interval '1 hour' WHERE id % 400 = 0 AND partition_key <> ''`,
	}, more...), `ANALYZE {schema}.jobs`) {
		if _, err := s.pool.Exec(t.Context(), s.sql(q)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
