package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// claimRace is what the claimers of testRaceCutClaimsGivenBack record,
// under mu: the jobs each claim that answered holds, and the tokens of the
// claims that failed (given back).
type claimRace struct {
	mu        sync.Mutex
	held      map[string][]int64 // token of a claim that answered: its jobs
	dead      map[string]bool    // token of a claim that failed
	givenBack int                // jobs the failed claims' give-backs released
}

// testRaceCutClaimsGivenBack: claimers whose claims are cut off by very
// short timeouts give each failed claim back (JobReleaseMany with its
// ClaimToken), as the runtime does, while the others claim. However the
// cut-off claims ended (rolled back, or committed after their call
// returned), afterwards every job is either running under the token of a
// claim that answered with it, or available with its attempt given back:
// none is left running under a failed claim's token, and no job a claim
// answered with was given back under it.
//
// A fast store may answer every claim within even the shortest timeout, so
// that nothing is cut off and the round proves nothing: rounds (each with
// jobs of its own queue) repeat until one cut a claim off, at most
// cutRounds times.
func testRaceCutClaimsGivenBack(t *testing.T, s store.Store) {
	const cutRounds = 20
	for round := range cutRounds {
		if r := cutClaimsRound(t, s, fmt.Sprintf("cut-%d", round)); len(r.dead) > 0 {
			return
		}
	}
	t.Fatalf("no claim was cut off in %d rounds: the race did not happen", cutRounds)
}

// cutClaimsRound runs one round of testRaceCutClaimsGivenBack over new
// jobs in queue, checks them and returns what the claimers recorded.
func cutClaimsRound(t *testing.T, s store.Store, queue string) *claimRace {
	t.Helper()
	const total, claimers, limit = 150, 6, 3
	ps := make([]*store.JobInsertParams, total)
	for i := range ps {
		ps[i] = newJob("k")
		ps[i].Queue = queue
	}
	js := insertNew(t, s, at(0), ps...)
	r := &claimRace{held: map[string][]int64{}, dead: map[string]bool{}}
	// Timeouts from less than a claim's time to a few claims' times: some
	// cut a claim off before the server began it (its bytes unread), most
	// while the server runs it, some not at all.
	timeouts := []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
		4 * time.Millisecond, 8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond, 250 * time.Millisecond}
	err := parallel(claimers, func(g int) error {
		for i := 0; i < 50; i++ {
			token := fmt.Sprintf("%s-tok-%d-%d", queue, g, i)
			ctx, cancel := context.WithTimeout(t.Context(), timeouts[(g+i)%len(timeouts)])
			jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, WorkerID: fmt.Sprint("w", g),
				Limit: limit, LeaseUntil: at(time.Hour), Now: at(time.Second), LeaseToken: token})
			cancel()
			if err == nil {
				r.mu.Lock()
				for _, j := range jobs {
					r.held[token] = append(r.held[token], j.ID)
				}
				r.mu.Unlock()
				if len(jobs) == 0 {
					return nil // every job is held (or being given back)
				}
				continue
			}
			r.mu.Lock()
			r.dead[token] = true
			r.mu.Unlock()
			n, err := s.JobReleaseMany(t.Context(), &store.JobReleaseManyParams{ClaimToken: token, Now: at(time.Second)})
			if err != nil {
				return fmt.Errorf("give back claim %s: %w", token, err)
			}
			r.mu.Lock()
			r.givenBack += n
			r.mu.Unlock()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCutClaimsGivenBack(t, s, js, r)
	return r
}

// wantCutClaimsGivenBack checks the jobs js after the race r.
func wantCutClaimsGivenBack(t *testing.T, s store.Store, js []*idemtype.JobRow, r *claimRace) {
	t.Helper()
	owner := map[int64]string{}
	for tok, ids := range r.held {
		for _, id := range ids {
			owner[id] = tok
		}
	}
	var running, available int
	for _, j := range js {
		got := mustGet(t, s, j.ID)
		switch {
		case got.State == idemtype.StateRunning && r.dead[got.LeaseToken]:
			t.Errorf("job %d is running under the token %q of a claim that failed and was given back", j.ID, got.LeaseToken)
		case got.State == idemtype.StateRunning && got.LeaseToken != owner[j.ID]:
			t.Errorf("job %d is running under %q, want the claim that answered with it (%q)", j.ID, got.LeaseToken, owner[j.ID])
		case got.State == idemtype.StateRunning:
			running++
		case got.State == idemtype.StateAvailable && owner[j.ID] != "":
			t.Errorf("job %d, held by the claim %q that answered with it, was given back", j.ID, owner[j.ID])
		case got.State == idemtype.StateAvailable && got.Attempt != 0:
			t.Errorf("job %d is available with attempt %d, want 0 (given back)", j.ID, got.Attempt)
		case got.State == idemtype.StateAvailable:
			available++
		default:
			t.Errorf("job %d is %s", j.ID, got.State)
		}
	}
	if running != len(owner) {
		t.Errorf("%d jobs running, want the %d the answered claims hold", running, len(owner))
	}
	t.Logf("%d claims answered (%d jobs held), %d failed and were given back (%d jobs); %d jobs available",
		len(r.held), running, len(r.dead), r.givenBack, available)
}
