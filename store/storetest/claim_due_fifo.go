package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testClaimDueFIFO: a FIFO partition's jobs are promoted as they come due
// (migration 0031), but the head rule still goes by id: a head scheduled
// for later blocks its followers, a follower due (and promoted) before
// its head does not overtake it, and once the head is due it runs first.
func testClaimDueFIFO(t *testing.T, s store.Store) {
	mk := func(kind string, runAt time.Duration) *store.JobInsertParams {
		p := newJob(kind)
		p.PartitionKey, p.RunAt = "p", at(runAt)
		return p
	}
	js := insertNew(t, s, at(0), mk("head", 2*time.Minute), mk("due_first", time.Minute), mk("available", 0))
	head, f1, f2 := js[0], js[1], js[2]
	if got := claim(t, s, at(90*time.Second), 10); len(got) != 0 {
		t.Fatalf("claim at +90s took %v: the head %d is scheduled for +2m", ids(got), head.ID)
	}
	wantState(t, s, head.ID, idemtype.StateScheduled)
	wantState(t, s, f1.ID, idemtype.StateAvailable) // promoted, and held back by the head
	c := claim(t, s, at(3*time.Minute), 10)
	wantIDs(t, "claim at +3m", ids(c), []int64{head.ID})
	for _, j := range c {
		finish1(t, s, completion(j, `1`, at(3*time.Minute)))
	}
	c = claim(t, s, at(3*time.Minute), 10)
	wantIDs(t, "claim after the head completed", ids(c), []int64{f1.ID})
	for _, j := range c {
		finish1(t, s, completion(j, `1`, at(3*time.Minute)))
	}
	wantIDs(t, "claim after the first follower completed", ids(claim(t, s, at(3*time.Minute), 10)), []int64{f2.ID})
}

// testClaimDueBacklogOtherTenant measures how long a due backlog of one
// tenant, larger than a claim promotes (1,000 per queue, earliest run_at
// first), keeps another tenant's jobs due after it from being claimed:
// tenant "big" has 2,500 jobs due from +1m, tenant "small" 10 due after
// all of them; with no promoter, claims of 10 promote 1,000 of big's,
// then 1,000, then the last 500 with small's, so small's jobs are all
// claimed by the fourth claim (rotation from the third on).
func testClaimDueBacklogOtherTenant(t *testing.T, s store.Store) {
	const big = 2500
	mk := func(tenant string, runAt time.Duration) *store.JobInsertParams {
		p := newJob("k")
		p.Tenant, p.RunAt = tenant, at(runAt)
		return p
	}
	var ps []*store.JobInsertParams
	for i := range big {
		ps = append(ps, mk("big", time.Minute+time.Duration(i)*time.Millisecond))
	}
	for b := 0; b < big; b += 500 {
		insertNew(t, s, at(0), ps[b:b+500]...)
	}
	ps = ps[:0]
	for range 10 {
		ps = append(ps, mk("small", time.Minute+big*time.Millisecond+time.Second))
	}
	insertNew(t, s, at(0), ps...)
	small := 0
	var per []string
	for n := 1; n <= 6 && small < 10; n++ {
		got := claim(t, s, at(time.Hour), 10)
		k := byTenant(got)["small"]
		small += k
		per = append(per, fmt.Sprint(k))
		if small == 10 {
			t.Logf("small's 10 jobs claimed by claim %d (small's per claim: %v)", n, per)
			if n > 4 {
				t.Errorf("small's jobs all claimed only by claim %d, want 4 at most", n)
			}
		}
	}
	if small != 10 {
		t.Errorf("after %d claims, %d of small's 10 jobs claimed (per claim: %v)", len(per), small, per)
	}
}
