package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
	// cutInFlight counts the failed claims cut off by a tripCtx, at the
	// store's second look at their context or later.
	cutInFlight int
}

// testRaceCutClaimsGivenBack: claimers whose claims are cut off give
// each failed claim back (JobReleaseMany with its ClaimToken), as the
// runtime does, while the others claim. However the cut-off claims ended
// (rolled back, or committed after their call returned), afterwards every
// job is either running under the token of a claim that answered with it,
// or available with its attempt given back: none is left running under a
// failed claim's token, and no job a claim answered with was given back
// under it.
//
// Claims are cut off two ways. Very short timeouts cut them off wherever
// the clock finds them: before the server began them, while it runs them,
// or not at all (on PostgreSQL mostly while the server runs them: the
// race a claim's late commit loses against its give-back). How many they
// cut off depends on the machine's load, so a round may cut off none: a
// claim may run in less than even the shortest timeout, or, on a loaded
// machine (GOMAXPROCS 1), run before the runtime fires its timer. So
// other claims are cut off at a set point of the store's own steps: their
// context (tripCtx) ends at the store's n-th look at it (a call of its
// Done or Err method), whatever the timing. A claim cut off at its second
// look or later was cut off after the store had begun it and found its
// context live (on SQLite at the third and fourth: taken by the writer,
// then dropped); the case fails unless at least one such claim failed, so
// it cannot pass without the race having happened.
func testRaceCutClaimsGivenBack(t *testing.T, s store.Store) {
	r := cutClaimsRound(t, s, "cut")
	if r.cutInFlight == 0 {
		t.Fatalf("no claim was cut off after the store had begun it (%d failed claims): the race did not happen", len(r.dead))
	}
}

// cutClaimsRound runs the claimers of testRaceCutClaimsGivenBack over new
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
	// while the server runs it, some not at all. Then cut-offs at the
	// store's n-th look at the context (negative: -n), from its second
	// look (the first is before it began anything) to looks a store may
	// never take (the claim is not cut off).
	cuts := []time.Duration{500 * time.Microsecond, time.Millisecond, -2, 2 * time.Millisecond, -3,
		4 * time.Millisecond, -4, 8 * time.Millisecond, -5, 16 * time.Millisecond, -6, 32 * time.Millisecond, -8,
		250 * time.Millisecond, -12}
	err := parallel(claimers, func(g int) error {
		for i := 0; i < 50; i++ {
			token := fmt.Sprintf("%s-tok-%d-%d", queue, g, i)
			var ctx context.Context
			var cancel context.CancelFunc
			var trip *tripCtx
			if cut := cuts[(g+i)%len(cuts)]; cut > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), cut)
			} else {
				trip = newTripCtx(int64(-cut))
				ctx, cancel = trip, func() {}
			}
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
			if trip != nil && !trip.tripped() {
				return fmt.Errorf("claim %s failed with its context live: %w", token, err)
			}
			r.mu.Lock()
			r.dead[token] = true
			if trip != nil {
				r.cutInFlight++
			}
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

// tripCtx is a context without deadline that ends (Canceled) at the
// trip-th look at it: the trip-th call of its Done or Err method, which
// already sees it ended. A store's looks at a claim's context come at the
// claim's own steps, so the cut-off comes at a set point of the claim
// whatever the machine's load.
type tripCtx struct {
	context.Context // values: none (context.Background)
	trip            int64
	looks           atomic.Int64
	done            chan struct{}
	once            sync.Once
}

func newTripCtx(trip int64) *tripCtx {
	return &tripCtx{Context: context.Background(), trip: trip, done: make(chan struct{})}
}

// look counts a look and ends the context at the trip-th.
func (c *tripCtx) look() {
	if c.looks.Add(1) == c.trip {
		c.once.Do(func() { close(c.done) })
	}
}

// tripped reports whether the context ended.
func (c *tripCtx) tripped() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Done implements context.Context.
func (c *tripCtx) Done() <-chan struct{} {
	c.look()
	return c.done
}

// Err implements context.Context.
func (c *tripCtx) Err() error {
	c.look()
	if c.tripped() {
		return context.Canceled
	}
	return nil
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
	t.Logf("%d claims answered (%d jobs held), %d failed (%d cut off at a set look) and were given back (%d jobs); %d jobs available",
		len(r.held), running, len(r.dead), r.cutInFlight, r.givenBack, available)
}
