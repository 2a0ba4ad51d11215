package sqlitestore

import (
	"regexp"
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
// available (jobs_claim_tenant), waiting for their run_at (jobs_due),
// running (jobs_running) and pending jobs by
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
		for _, idx := range []string{"jobs_finished", "jobs_claim_tenant", "jobs_due", "jobs_running", "jobs_pending"} {
			if !strings.Contains(plan, "INDEX "+idx) {
				t.Errorf("tenant %q: the plan does not use %s:\n%s", tenant, idx, plan)
			}
		}
		if strings.Contains(plan, "SCAN jobs\n") || strings.HasSuffix(plan, "SCAN jobs") {
			t.Errorf("tenant %q: the plan scans the jobs table:\n%s", tenant, plan)
		}
	}
}

// explain returns the plan of q with args, one line per step. An EXPLAIN
// plans with the schema its connection last read and does not check it
// against the file (it runs no transaction), so a connection of the read
// pool that last ran before a schema change would explain with the old
// indexes: a query of sqlite_master on the same connection reads the
// schema first.
func (s *Store) explain(t *testing.T, q string, args ...any) string {
	t.Helper()
	conn, err := s.rdb.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRowContext(t.Context(), "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, q)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestRuntimePlansUsePartialIndexes: the statements of the runtime that
// spell job states (sqlAvailable, sqlDue, sqlUnfinished, sqlFinished) are served
// by the partial indexes whose predicates they repeat: a claim probes
// jobs_claim_tenant and both probes of its FIFO head rule
// jobs_partition_head, the
// tenants' skip scan jobs_claim_tenant, retention jobs_finished, the
// running counts of concurrency limits, the rescuer, the end of holds and
// the lookup by claim token jobs_running. A predicate spelt differently
// from its index's makes the planner scan.
func TestRuntimePlansUsePartialIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	storetest.SeedListPlans(t, s)
	for _, kinds := range [][]string{nil, {"k1", "k2"}} {
		p := &store.JobClaimParams{Kinds: kinds, WorkerID: "w"}
		for _, tenants := range [][]string{{"t1"}, {"t1", "t2"}} {
			q, args := claimTenantsSQL(p, "default", tenants, []int{10, 5}[:len(tenants)], 1)
			plan := s.explain(t, q, args...)
			if !strings.Contains(plan, "INDEX jobs_claim_tenant") {
				t.Errorf("claim of %v, kinds %v: the plan does not use jobs_claim_tenant:\n%s", tenants, kinds, plan)
			}
			// Both probes of the FIFO head rule per tenant, which count the
			// cancelled jobs still holding their partition (0026).
			if n := strings.Count(plan, "INDEX jobs_partition_head"); n != 2*len(tenants) {
				t.Errorf("claim of %v, kinds %v: %d probes of the head rule read jobs_partition_head, want %d:\n%s",
					tenants, kinds, n, 2*len(tenants), plan)
			}
			if strings.Contains(plan, "SCAN j") || strings.Contains(plan, "SCAN h") {
				t.Errorf("claim of %v, kinds %v: the plan scans:\n%s", tenants, kinds, plan)
			}
		}
		q, args, err := nextTenantsSQL(kinds, "default", 1, "", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if plan := s.explain(t, q, args...); !strings.Contains(plan, "INDEX jobs_claim_tenant") {
			t.Errorf("tenants' skip scan, kinds %v: the plan does not use jobs_claim_tenant:\n%s", kinds, plan)
		}
	}
	for name, c := range map[string]struct {
		q     string
		index string
		args  []any
	}{
		"retention":    {qRetentionSelect, "jobs_finished", []any{1, 1, 1, 1, 100}},
		"stats oldest": {qStatsOldest, "jobs_claim_tenant", []any{"", 1}},
		// The due scheduled and retryable jobs: their own index (0031).
		"stats oldest due": {qStatsOldest, "jobs_due", []any{"", 1}},
		"promoter":         {qPromote, "jobs_due", []any{1, 100}},
		"claim's promote":  {qClaimPromote, "jobs_due", []any{"default", 1}},
		// The running counts of concurrency limits, which count the
		// cancelled jobs still holding their partition (0028) and the
		// retried ones until their old lease ends (0030), the rescuer,
		// the end of holds and the lookup by claim token: one index of the
		// jobs that take a slot (0029).
		"running of every scope":       {qRunningScopes, "jobs_running", []any{1}},
		"running of a tenant in queue": {qRunningTenantQueue, "jobs_running", []any{"t1", "default", 1}},
		"running of a tenant":          {qRunningTenant, "jobs_running", []any{"t1", "", 1}},
		"running of a queue":           {qRunningQueue, "jobs_running", []any{"", "default", 1}},
		"rescuer":                      {qRescueSelect, "jobs_running", []any{1, 100}},
		"end of holds":                 {qCancelHoldEnd, "jobs_running", []any{1, 100}},
		"running under a claim token":  {qRunningUnder, "jobs_running", []any{"tok"}},
	} {
		if plan := s.explain(t, c.q, c.args...); !usesIndex(plan, c.index) {
			t.Errorf("%s: the plan does not use %s:\n%s", name, c.index, plan)
		}
	}
}

// usesIndex reports whether an EXPLAIN QUERY PLAN text reads index name
// (not merely one whose name starts with it).
func usesIndex(plan, name string) bool {
	for _, line := range strings.Split(plan, "\n") {
		if _, rest, ok := strings.Cut(line, "INDEX "+name); ok && (rest == "" || rest[0] == ' ') {
			return true
		}
	}
	return false
}

// TestIndexPredicatesSpellStatesWithoutLists: no partial index's predicate
// holds an IN list of more than two values. SQLite evaluates the predicate
// of every partial index for each row it inserts, and for the old and new
// row of each update, and an IN list of three or more constants outside a
// WHERE clause builds a temporary B-tree each time (OpenEphemeral): three
// of them per job inserted, more per claim and finish, a third of a
// single insert's CPU. A list of two compares directly.
func TestIndexPredicatesSpellStatesWithoutLists(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	rows, err := s.rdb.QueryContext(t.Context(), `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	inList := regexp.MustCompile(`(?i)\bIN\s*\(([^()]*)\)`)
	n := 0
	for rows.Next() {
		var name, sql string
		if err := rows.Scan(&name, &sql); err != nil {
			t.Fatal(err)
		}
		n++
		for _, m := range inList.FindAllStringSubmatch(sql, -1) {
			if strings.Count(m[1], ",") >= 2 {
				t.Errorf("index %s: predicate holds an IN list of %d values (%s): spell it with stateIn's OR form", name, strings.Count(m[1], ",")+1, m[0])
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("read %d indexes: the schema was not read", n)
	}
}
