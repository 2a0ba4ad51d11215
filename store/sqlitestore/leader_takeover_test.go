package sqlitestore

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// leads makes owner attempt the leadership "maintenance" (one hour terms)
// at now and reports whether it leads.
func leads(t *testing.T, s *Store, owner string, now time.Time) bool {
	t.Helper()
	ok, err := s.LeaderAttempt(t.Context(), &store.LeaderParams{Name: "maintenance", Owner: owner, TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestLeaderTakeoverSparesAStoreThatOutlivedTheLockHolder: the process lock
// tells only that no other holder of it is alive, not that no other Store
// has the file open. A Store opened while another held the lock keeps the
// file open, and leads, after that holder closed; a Store opened then gets
// the process lock but must not clear the live leader row (it did, and led
// at once beside the live leader: two leaders).
func TestLeaderTakeoverSparesAStoreThatOutlivedTheLockHolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	a, err := Open(t.Context(), path, nil) // takes the process lock
	if err != nil {
		t.Fatal(err)
	}
	if a.lock == nil {
		t.Fatal("the first Store did not get the process lock")
	}
	b := openAt(t, path) // without the process lock: a holds it
	if !leads(t, b, "b", t0) {
		t.Fatal("b did not lead (no leader yet)")
	}
	a.Close() // b is still open, and leads until t0+1h

	c := openAt(t, path)
	if c.lock == nil {
		t.Fatal("the Store opened after the holder closed did not get the process lock")
	}
	if leads(t, c, "c", t0.Add(time.Minute)) {
		t.Fatal("c leads at t0+1m while b, still open, holds a term until t0+1h")
	}
	if !leads(t, b, "b", t0.Add(2*time.Minute)) {
		t.Fatal("b lost its live term")
	}
	// Once b is gone too, the next Store opened takes over at once.
	b.Close()
	c.Close()
	d := openAt(t, path)
	if !leads(t, d, "d", t0.Add(3*time.Minute)) {
		t.Fatal("with every other Store closed, a new Store waits out the old term")
	}
}

// TestLeaderTakeoverWaitsForEveryOpenStore: a takeover needs every other
// Store closed, whichever of them held the process lock and in whatever
// order they close.
func TestLeaderTakeoverWaitsForEveryOpenStore(t *testing.T) {
	t.Parallel()
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idem.db")
			var open []*Store
			for range 3 {
				open = append(open, openAt(t, path))
			}
			if !leads(t, open[1], "leader", t0) {
				t.Fatal("no first leader")
			}
			for i, n := range order {
				open[n].Close()
				next := openAt(t, path)
				got := leads(t, next, fmt.Sprint("next-", i), t0.Add(time.Minute))
				next.Close()
				if last := i == len(order)-1; got != last {
					t.Fatalf("after closing %d of 3 Stores, a new Store leads: %v", i+1, got)
				}
			}
		})
	}
}

// TestLeaderTakeoverRacesOpens: Stores opened and closed at the same time
// as another is opened and made leader never clear the new leader's row —
// a Store still in Open has written no leader row, and it holds the
// open-files lock before Open returns.
func TestLeaderTakeoverRacesOpens(t *testing.T) {
	t.Parallel()
	for i := range 10 {
		path := filepath.Join(t.TempDir(), fmt.Sprint("idem-", i, ".db"))
		var wg sync.WaitGroup
		var leader *Store
		wg.Go(func() {
			s, err := Open(t.Context(), path, nil)
			if err != nil {
				t.Error(err)
				return
			}
			leader = s
			if !leads(t, s, "leader", t0) {
				t.Error("the only Store that tries does not lead")
			}
		})
		for range 2 {
			wg.Go(func() {
				s, err := Open(t.Context(), path, nil)
				if err != nil {
					t.Error(err)
					return
				}
				s.Close()
			})
		}
		wg.Wait()
		if leader == nil {
			t.FailNow()
		}
		other := openAt(t, path)
		got := leads(t, other, "other", t0.Add(time.Minute))
		other.Close()
		leader.Close()
		if got {
			t.Fatalf("round %d: a Store opened beside the live leader took over", i)
		}
	}
}
