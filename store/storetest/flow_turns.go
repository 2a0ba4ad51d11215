package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// testFairEmptyTenantUnderQueueLimit: a queue concurrency of 2 with one
// slot taken by tenant a's FIFO head; a's only other job waits behind it,
// so a is visited but yields nothing. A claim of 2 that visits a first
// must still start b's job (the one free slot), not come back empty.
func testFairEmptyTenantUnderQueueLimit(t *testing.T, s store.Store) {
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Concurrency: 2})
	for range 2 {
		p := newJob("k")
		p.Tenant, p.PartitionKey = "a", "p"
		insertNew(t, s, at(0), p)
	}
	insertNew(t, s, at(0), tenantJobs("b", 1)...)
	now := at(time.Second)
	head := claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, Tenant: "a", WorkerID: "w1",
		Limit: 1, LeaseUntil: now.Add(lease), Now: now})
	if len(head) != 1 {
		t.Fatalf("claim of a's head: %d jobs", len(head))
	}
	if got := byTenant(claim(t, s, now, 2)); got["b"] != 1 {
		t.Fatalf("claim with one free slot: %v; want b's job (a has none claimable)", got)
	}
}

// testFairClaimLimitLeftOutTenantFillsRest: claims of 4 among tenants a and
// b with one job each and c with many: the shares are 2, 2 and 0, a and b
// run short, and c (left out of the first round by the claim's limit)
// takes the rest: the claim is full, not half empty.
func testFairClaimLimitLeftOutTenantFillsRest(t *testing.T, s store.Store) {
	insertTenant(t, s, "a", 1)
	insertTenant(t, s, "b", 1)
	insertTenant(t, s, "c", 10)
	if got := byTenant(claim(t, s, at(time.Second), 4)); got["a"] != 1 || got["b"] != 1 || got["c"] != 2 {
		t.Fatalf("claim of 4: %v; want a 1, b 1, c 2", got)
	}
}
