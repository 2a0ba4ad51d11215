package idem_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// announceCounted is a SQLite store that counts the live subscriptions of
// its store.Announcer (subscribed and not yet stopped).
type announceCounted struct {
	*sqlitestore.Store
	mu   sync.Mutex
	live int
}

func (s *announceCounted) Announce(fn func(queues []string)) (stop func()) {
	s.mu.Lock()
	s.live++
	s.mu.Unlock()
	inner := s.Store.Announce(fn)
	var once sync.Once
	return func() {
		once.Do(func() {
			inner()
			s.mu.Lock()
			s.live--
			s.mu.Unlock()
		})
	}
}

func (s *announceCounted) subscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// TestClientsDoNotAccumulateAnnounceSubscriptions: clients made one after
// another on one long-lived SQLite store — started and stopped, or only
// used to enqueue and long-poll — leave no subscription to the store's
// announcements behind. Before the fix every NewClient subscribed for the
// store's life: 40 clients left 40 subscriptions (and 40 notifiers the
// store kept alive and woke at each announcement).
func TestClientsDoNotAccumulateAnnounceSubscriptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &announceCounted{Store: testStore(t)}
	start := st.subscriptions()
	for i := range 20 {
		// A working client: subscribed while it runs, released by Stop.
		w := idem.NewWorkers()
		w.Handle("noop", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
		c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true,
			Workers: w, Queues: map[string]idem.QueueConfig{"q": {MaxWorkers: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if got := st.subscriptions(); got != start+1 {
			t.Fatalf("client %d running: %d subscriptions, want %d (its producers hear the store)", i, got, start+1)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// A client never started: it enqueues and long-polls a claim.
		u, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: "other"}}); err != nil {
			t.Fatal(err)
		}
		jobs, err := u.Claim(ctx, idem.ClaimParams{Queues: []string{"empty"}, WorkerID: "w",
			Lease: time.Minute, Wait: time.Millisecond})
		if err != nil || len(jobs) != 0 {
			t.Fatalf("claim of an empty queue: %v %v", jobs, err)
		}
	}
	if got := st.subscriptions(); got != start {
		t.Fatalf("after 40 clients: %d subscriptions to the store's announcements, want %d as at the start", got, start)
	}
}
