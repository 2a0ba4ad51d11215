package leadership_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/leadership"
)

// fixedClock is a settable clock shared by electors.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestElectorOneLeaderAmongN: eight electors on one store campaign at once
// (released together by a start barrier): exactly one wins. The others
// cannot take over while its lease runs, even just before expiry; after it
// expires without renewal exactly one of them takes over; the old leader's
// next attempt then fails.
func TestElectorOneLeaderAmongN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	clk := &fixedClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	const n = 8
	const ttl = 10 * time.Second
	es := make([]*leadership.Elector, n)
	for i := range es {
		es[i] = leadership.New(st, leadership.Config{Owner: fmt.Sprintf("node-%d", i), TTL: ttl, Now: clk.Now})
	}
	campaign := func(skip int) []int {
		start := make(chan struct{})
		won := make([]bool, n)
		var wg sync.WaitGroup
		for i, e := range es {
			if i == skip {
				continue
			}
			wg.Go(func() {
				<-start
				ok, err := e.RunOnce(ctx)
				if err != nil {
					t.Errorf("elector %d: %v", i, err)
				}
				won[i] = ok
			})
		}
		close(start)
		wg.Wait()
		var winners []int
		for i, ok := range won {
			if ok {
				winners = append(winners, i)
			}
		}
		return winners
	}
	winners := campaign(-1)
	if len(winners) != 1 {
		t.Fatalf("winners %v, want exactly one", winners)
	}
	first := winners[0]
	clk.Add(ttl - time.Millisecond)
	if w := campaign(first); len(w) != 0 {
		t.Fatalf("electors %v took over a live leadership", w)
	}
	clk.Add(2 * time.Millisecond) // the leader's row has expired
	winners = campaign(first)
	if len(winners) != 1 {
		t.Fatalf("after expiry: winners %v, want exactly one", winners)
	}
	if ok, err := es[first].RunOnce(ctx); ok || err != nil {
		t.Fatalf("the old leader still wins after a takeover (%v)", err)
	}
	if es[first].IsLeader() || !es[winners[0]].IsLeader() {
		t.Fatal("IsLeader does not follow the takeover")
	}
}

// TestElectorNotLeaderPastItsTerm: a leader whose renewals stall (no
// attempt ends) stops reporting itself leader once the term it won runs
// out, when another node may take over; a new successful attempt makes it
// leader again.
func TestElectorNotLeaderPastItsTerm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	clk := &fixedClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	const ttl = 10 * time.Second
	e := leadership.New(st, leadership.Config{Owner: "a", TTL: ttl, Now: clk.Now})
	if ok, err := e.RunOnce(ctx); !ok || err != nil {
		t.Fatalf("first attempt: %v %v", ok, err)
	}
	clk.Add(ttl - time.Millisecond)
	if !e.IsLeader() {
		t.Fatal("not leader within its term")
	}
	clk.Add(time.Millisecond)
	if e.IsLeader() {
		t.Fatal("still leader when its term ran out without a renewal")
	}
	other := leadership.New(st, leadership.Config{Owner: "b", TTL: ttl, Now: clk.Now})
	if ok, err := other.RunOnce(ctx); !ok || err != nil {
		t.Fatalf("b after a's term: %v %v", ok, err)
	}
	if e.IsLeader() || !other.IsLeader() {
		t.Fatalf("a leads %v, b leads %v; want only b", e.IsLeader(), other.IsLeader())
	}
}
