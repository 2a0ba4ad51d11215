package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// cancelHoldWakeCases: the end of a cancelled job's hold on its FIFO
// partition is announced (store.Listener or store.Announcer), as an insert
// is: a long-polling claim of the queue waits for exactly that job.
func cancelHoldWakeCases() []testCase {
	return []testCase{
		{"FIFO/hold_ended_by_rescue_announces_queue", testCancelHoldRescueAnnounces},
		{"FIFO/hold_ended_by_acknowledgement_announces_queue", testCancelHoldAckAnnounces},
	}
}

// announcements returns the queues s announces from now on, through
// Listen (store.Listener) or Announce (store.Announcer): every store has
// one of the two.
func announcements(t *testing.T, s store.Store) <-chan string {
	t.Helper()
	if l, ok := s.(store.Listener); ok {
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		ch, err := l.Listen(ctx)
		if err != nil {
			t.Fatalf("Listen: %v", err)
		}
		return ch
	}
	a, ok := s.(store.Announcer)
	if !ok {
		t.Fatal("the store announces available jobs neither through Listen nor through Announce")
	}
	ch := make(chan string, 64)
	t.Cleanup(a.Announce(func(queues []string) {
		for _, q := range queues {
			select {
			case ch <- q:
			default: // the test waits for one queue; a full buffer loses nothing it needs
			}
		}
	}))
	return ch
}

// wantAnnounced waits for queue (or "", any queue) on ch.
func wantAnnounced(t *testing.T, ch <-chan string, queue, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second) // a store that never announces fails instead of hanging
	for {
		select {
		case v := <-ch:
			if v == queue || v == "" {
				return
			}
		case <-deadline:
			t.Fatalf("%s: queue %q not announced within 10s", what, queue)
		}
	}
}

// testCancelHoldRescueAnnounces: the rescuer ending the hold of a
// cancelled head whose lease ended announces the partition's queue.
func testCancelHoldRescueAnnounces(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claimLease(t, s, js[0], at(0), at(30*time.Second))
	cancelJob(t, s, c, at(time.Second))
	ch := announcements(t, s)
	if got := rescue(t, s, at(time.Minute), 100); len(got) != 0 {
		t.Errorf("rescue reported %v: a cancelled job is not rescued", got)
	}
	wantAnnounced(t, ch, "q", "the rescuer ended the cancelled head's hold")
	wantIDs(t, "after the hold ended", ids(claim(t, s, at(time.Minute), 10, "q")), []int64{js[1].ID})
}

// testCancelHoldAckAnnounces: the refused finish that acknowledges a
// cancelled head's cancel (its handler returned) announces the
// partition's queue.
func testCancelHoldAckAnnounces(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), partitioned("a1", "q", "A"), partitioned("a2", "q", "A"))
	c := claimLease(t, s, js[0], at(0), at(time.Hour))
	cancelJob(t, s, c, at(time.Second))
	ch := announcements(t, s)
	if errs := finishAll(t, s, completion(c, `1`, at(2*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled head: %v, want ErrLeaseLost", errs[0])
	}
	wantAnnounced(t, ch, "q", "the cancel was acknowledged")
	wantIDs(t, "after the acknowledgement", ids(claim(t, s, at(3*time.Second), 10, "q")), []int64{js[1].ID})
}
