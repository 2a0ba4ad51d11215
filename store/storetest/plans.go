package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// ListPlanCase is one documented filter of JobList (GET /v1/jobs) and the
// index that must serve it. The index names are the same in every
// backend; docs/indexes.md shows the plans.
type ListPlanCase struct {
	Name   string
	Filter store.JobFilter
	// Index is the index that serves the filter; the plan may use Alt
	// instead when Alt is not empty (dead jobs: the index of finished jobs).
	Index, Alt string
}

// ListPlanCases returns the documented filters, each within a tenant (the
// HTTP API always lists inside one tenant).
func ListPlanCases() []ListPlanCase {
	// Queue, kind, state and time filters walk the tenant's jobs newest
	// first (jobs_tenant_id in SQLite, jobs_tenant_idx in PostgreSQL) and
	// stop at the page size: the full indexes that served them cost a third
	// of the write throughput (migration 0013, docs/indexes.md). A dead-job
	// list may use the partial index of finished jobs instead.
	return []ListPlanCase{
		{"queue", store.JobFilter{Tenant: "t1", Queue: "q7"}, "jobs_tenant", ""},
		{"kind", store.JobFilter{Tenant: "t1", Kind: "k7"}, "jobs_tenant", ""},
		{"state", store.JobFilter{Tenant: "t1", States: []idemtype.JobState{idemtype.StateDead}}, "jobs_tenant", "jobs_finished"},
		{"partition_key", store.JobFilter{Tenant: "t1", PartitionKey: "p7"}, "jobs_list_partition", ""},
		{"idempotency_key", store.JobFilter{Tenant: "t1", IdempotencyKey: "key-77"}, "jobs_list_key", ""},
		{"since_until", store.JobFilter{Tenant: "t1", Since: base.Add(1000 * time.Second),
			Until: base.Add(1500 * time.Second)}, "jobs_tenant", ""},
	}
}

// planSeedJobs is how many jobs SeedListPlans inserts.
const planSeedJobs = 4000

// SeedListPlans inserts jobs spread over 20 tenants, 50 queues, 50 kinds,
// 50 partitions and distinct keys, one second apart, so a planner with
// statistics sees every documented filter as selective, as it is on a busy
// server.
func SeedListPlans(t *testing.T, s store.Store) {
	t.Helper()
	for off := 0; off < planSeedJobs; off += 500 {
		var batch []*store.JobInsertParams
		for i := off; i < off+500; i++ {
			p := newJob(fmt.Sprintf("k%d", i%50))
			p.Tenant = fmt.Sprintf("t%d", i%20+1)
			p.Queue = fmt.Sprintf("q%d", i%50)
			p.Args = json.RawMessage(`{}`)
			if i%3 == 0 {
				p.PartitionKey = fmt.Sprintf("p%d", i%50)
			}
			if i%4 == 0 {
				p.IdempotencyKey, p.Fingerprint = fmt.Sprintf("key-%d", i), "fp"
				p.DedupWindow, p.ResultTTL = time.Hour, time.Hour
			}
			batch = append(batch, p)
		}
		if _, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: batch,
			Now: base.Add(time.Duration(off) * time.Second)}); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

// CheckListPlans fails unless the plan of every ListPlanCases filter, as
// explain returns it for the backend's JobList query, names its index and
// scans no table.
func CheckListPlans(t *testing.T, explain func(f store.JobFilter) (string, error), tableScan string) {
	t.Helper()
	for _, c := range ListPlanCases() {
		plan, err := explain(c.Filter)
		if err != nil {
			t.Fatalf("%s: explain: %v", c.Name, err)
		}
		t.Logf("%s:\n%s", c.Name, plan)
		uses := strings.Contains(plan, c.Index) || (c.Alt != "" && strings.Contains(plan, c.Alt))
		if !uses || strings.Contains(plan, tableScan) {
			t.Errorf("%s: the plan does not use %s:\n%s", c.Name, c.Index, plan)
		}
	}
}
