package sqlitestore

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/store/storetest"
)

// TestHeldBackPlanUsesClaimIndex: the look-up of claimable work in the
// scopes a spent limit closed (qHeldBack) probes jobs_claim_tenant, for
// a tenant and for the whole queue, with and without kinds: never a scan
// of the jobs table. A plan assert, not a timing assert.
func TestHeldBackPlanUsesClaimIndex(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	storetest.SeedListPlans(t, s)
	for _, kinds := range [][]string{nil, {"a", "b"}} {
		args := []any{"default", int64(1), `["t1", ""]`}
		for _, k := range kinds {
			args = append(args, k)
		}
		plan := s.explain(t, qHeldBack(kinds), args...)
		if strings.Count(plan, "INDEX jobs_claim_tenant") < 2 {
			t.Errorf("kinds %v: the plan does not probe jobs_claim_tenant in both branches:\n%s", kinds, plan)
		}
		if strings.Contains(plan, "SCAN jobs\n") || strings.HasSuffix(plan, "SCAN jobs") {
			t.Errorf("kinds %v: the plan scans the jobs table:\n%s", kinds, plan)
		}
		t.Logf("kinds %v:\n%s", kinds, plan)
	}
}
