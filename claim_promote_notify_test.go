package idem_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// claimSignal closes first when the first JobClaim of its store returns.
type claimSignal struct {
	once  sync.Once
	first chan struct{}
}

func (c *claimSignal) claimed() { c.once.Do(func() { close(c.first) }) }

// firstClaimPG and firstClaimSQLite are stores that signal their first
// JobClaim; each keeps its store's wake-ups (Listener, Announcer).
type firstClaimPG struct {
	*pgstore.Store
	*claimSignal
}

func (c firstClaimPG) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	defer c.claimed()
	return c.Store.JobClaim(ctx, p)
}

type firstClaimSQLite struct {
	*sqlitestore.Store
	*claimSignal
}

func (c firstClaimSQLite) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	defer c.claimed()
	return c.Store.JobClaim(ctx, p)
}

// watchFirstClaim returns st wrapped to close the returned channel when
// its first JobClaim returns.
func watchFirstClaim(st store.Store) (store.Store, <-chan struct{}) {
	sig := &claimSignal{first: make(chan struct{})}
	switch s := st.(type) {
	case *pgstore.Store:
		return firstClaimPG{s, sig}, sig.first
	default:
		return firstClaimSQLite{s.(*sqlitestore.Store), sig}, sig.first
	}
}

// TestClaimPromotionWakesOtherNode (both stores): two clients on one
// database (PostgreSQL: two store handles, as two processes; SQLite: one
// store, as two clients of a process), both polling every hour and
// without maintenance (no promoter). Ten jobs become due by the clock; the
// first node's claim promotes them all and takes two (its workers), and
// the other node, idle since its own claim found nothing due, must run
// some of the eight left available at once — woken by the claim's
// announcement, not an hour later by its poll. Before, a claim that
// promoted more than it took told nobody.
func TestClaimPromotionWakesOtherNode(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, second := openLeaseStore(t, kind)
			other := st
			if kind == "postgres" {
				other = second()
			}
			clock := &fakeClock{now: time.Now().UTC()}
			release := make(chan struct{})
			busy := idem.NewWorkers()
			busy.Handle("due", func(ctx context.Context, row *idem.JobRow) (json.RawMessage, error) {
				<-release
				return nil, nil
			})
			ran := make(chan int64, 16)
			idle := idem.NewWorkers()
			idle.Handle("due", func(ctx context.Context, row *idem.JobRow) (json.RawMessage, error) {
				ran <- row.ID
				return nil, nil
			})
			client := func(st store.Store, workers *idem.Workers) *idem.Client {
				c, err := idem.NewClient(st, &idem.Config{Workers: workers, Logger: quietLogger(), Now: clock.Now,
					PollInterval: time.Hour, DisableMaintenance: true, Queues: map[string]idem.QueueConfig{"due": {MaxWorkers: 2}}})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			stop := func(c *idem.Client) {
				sctx, cancel := context.WithTimeout(ctx, leaseTimeout)
				defer cancel()
				if err := c.Stop(sctx); err != nil {
					t.Errorf("stop: %v", err)
				}
			}
			watched, first := watchFirstClaim(other)
			b := client(watched, idle)
			a := client(st, busy)
			for range 10 {
				if _, err := a.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "due",
					Opts: &idem.EnqueueOpts{Queue: "due", RunAt: clock.Now().Add(time.Minute)}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stop(b) })
			<-first // b's claim found nothing due: from now on it waits for a wake-up
			if kind == "postgres" {
				waitListening(t, other.(*pgstore.Store).Schema(), 1)
			}
			clock.Add(2 * time.Minute)
			if err := a.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stop(a) })
			t.Cleanup(func() { close(release) })
			select {
			case id := <-ran:
				t.Logf("the idle node ran job %d", id)
			case <-time.After(leaseTimeout):
				t.Fatalf("the idle node ran nothing within %v (its poll is an hour away) although the other node's claim left due jobs available", leaseTimeout)
			}
		})
	}
}
