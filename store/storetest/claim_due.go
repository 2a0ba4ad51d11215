package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Jobs waiting for their run_at (scheduled, retryable) sit outside the
// claim index; a claim makes the due ones of its queues available first
// (migration 0031). These cases hold the claims to what they did when
// they read every claimable state themselves.

// testClaimDueByPriority: a due scheduled job takes its place among the
// available ones by priority, as an available job would; one not yet due
// is never claimed and stays scheduled.
func testClaimDueByPriority(t *testing.T, s store.Store) {
	mk := func(kind string, prio int, runAt time.Duration) *store.JobInsertParams {
		p := newJob(kind)
		p.Priority, p.RunAt = prio, at(runAt)
		return p
	}
	js := insertNew(t, s, at(0), mk("avail", 0, -time.Minute), mk("due", 5, time.Minute), mk("later", 9, time.Hour))
	wantState(t, s, js[1].ID, idemtype.StateScheduled)
	wantIDs(t, "first claim at +2m", ids(claim(t, s, at(2*time.Minute), 1)), []int64{js[1].ID})
	wantIDs(t, "second claim at +2m", ids(claim(t, s, at(2*time.Minute), 1)), []int64{js[0].ID})
	if got := claim(t, s, at(2*time.Minute), 10); len(got) != 0 {
		t.Errorf("claimed %v before their RunAt", ids(got))
	}
	wantState(t, s, js[2].ID, idemtype.StateScheduled)
}

// testClaimDueBeyondOneBatch: more due jobs than a claim promotes at once
// (1,000 per queue, the stores' claimPromoteMax) are all claimed, in
// run_at order across the claims, with no promoter running.
func testClaimDueBeyondOneBatch(t *testing.T, s store.Store) {
	const n = 1300
	var ps []*store.JobInsertParams
	for i := range n {
		p := newJob("k")
		p.RunAt = at(time.Minute + time.Duration(i)*time.Millisecond)
		ps = append(ps, p)
	}
	var want []int64
	for b := 0; b < n; b += 500 {
		for _, j := range insertNew(t, s, at(0), ps[b:min(b+500, n)]...) {
			want = append(want, j.ID)
		}
	}
	var got []int64
	for len(got) < n+1 {
		jobs := claim(t, s, at(time.Hour), 100)
		if len(jobs) == 0 {
			break
		}
		got = append(got, ids(jobs)...)
	}
	wantIDs(t, "claims of 100 at +1h", got, want)
}

// testRaceClaimsOfDueJobs: 8 claimers and the promoter race over 600 due
// scheduled and 200 due retryable jobs beside 200 not yet due: each due
// job is claimed exactly once, none is lost, the others stay scheduled.
func testRaceClaimsOfDueJobs(t *testing.T, s store.Store) {
	var ps, later []*store.JobInsertParams
	for i := range 1000 {
		p := newJob("k")
		switch {
		case i < 200:
			// made retryable below
		case i < 800:
			p.RunAt = at(time.Minute)
		default:
			p.RunAt = at(time.Hour)
			later = append(later, p)
			continue
		}
		ps = append(ps, p)
	}
	insertNew(t, s, at(0), ps[:500]...)
	insertNew(t, s, at(0), ps[500:]...)
	laterJobs := insertNew(t, s, at(0), later...)
	for _, j := range claim(t, s, at(0), 200) {
		finish1(t, s, failure(j, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Minute), at(time.Second)))
	}
	now := at(2 * time.Minute)
	var mu sync.Mutex
	seen := map[int64]int{}
	var claimers atomic.Int32
	claimers.Store(8)
	err := parallel(9, func(g int) error {
		if g == 8 { // the promoter, until the claimers are done
			for claimers.Load() > 0 {
				if _, err := s.JobPromote(t.Context(), &store.JobPromoteParams{Now: now, Limit: 50}); err != nil {
					return err
				}
			}
			return nil
		}
		defer claimers.Add(-1)
		for {
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 10, LeaseUntil: now.Add(time.Hour), Now: now})
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				return nil
			}
			mu.Lock()
			for _, j := range jobs {
				seen[j.ID]++
			}
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 800 {
		t.Errorf("%d distinct due jobs claimed, want 800", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %d claimed %d times", id, n)
		}
	}
	for _, j := range laterJobs {
		if seen[j.ID] > 0 {
			t.Errorf("job %d claimed before its RunAt", j.ID)
		}
		wantState(t, s, j.ID, idemtype.StateScheduled)
	}
}
