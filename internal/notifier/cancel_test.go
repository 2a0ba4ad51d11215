package notifier_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/notifier"
	"github.com/idem-dev/idem/store"
)

// TestNotifierRelaysCancelsAndResyncs: a cancel notice goes to the cancel
// hook (not to a queue named after it), in the order announced; the
// resync hook is told when the listener is first in place and again at
// each reconnect (""), which also wakes every queue's producer and long
// polls.
func TestNotifierRelaysCancelsAndResyncs(t *testing.T) {
	t.Parallel()
	l := &chanListener{ch: make(chan string)}
	n := notifier.New(l, nil)
	events := make(chan string, 16)
	n.Subscribe("a", func() { events <- "wake a" })
	n.Subscribe("b", func() { events <- "wake b" })
	n.SubscribeCancels(func(lease store.Lease) {
		events <- "cancel " + lease.Token
	}, func() { events <- "resync" })
	poll, stopPoll := n.WaitInserted([]string{"b"})
	defer stopPoll()
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	next := func() string {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("nothing relayed")
			return ""
		}
	}
	if e := next(); e != "resync" {
		t.Fatalf("first event %q, want the resync of the first connection", e)
	}
	l.ch <- store.CancelNotice(store.Lease{ID: 7, Token: "tok"})
	l.ch <- "a"
	if e := next(); e != "cancel tok" {
		t.Fatalf("got %q, want the cancel first", e)
	}
	if e := next(); e != "wake a" {
		t.Fatalf("got %q, want queue a woken after the cancel", e)
	}
	if closed(poll) {
		t.Fatal("the long poll of b was woken by a cancel or by queue a")
	}
	l.ch <- "" // reconnected
	got := map[string]bool{next(): true, next(): true, next(): true}
	if !got["wake a"] || !got["wake b"] || !got["resync"] {
		t.Fatalf("after a reconnect got %v, want every queue woken and a resync", got)
	}
	if !closed(poll) {
		t.Fatal("a reconnect did not wake the long polls")
	}
}
