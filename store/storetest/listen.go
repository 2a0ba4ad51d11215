package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// listenCases test the optional store.Listener capability. A store that
// does not implement it skips them (by capability, not by backend name).
func listenCases() []testCase {
	return []testCase{
		{"Listener/insert_notifies_its_queue", testListenInsert},
	}
}

// listener returns s as a store.Listener, or skips the test.
func listener(t *testing.T, s store.Store) store.Listener {
	t.Helper()
	l, ok := s.(store.Listener)
	if !ok {
		t.Skip("store does not implement store.Listener")
	}
	return l
}

func testListenInsert(t *testing.T, s store.Store) {
	l := listener(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := l.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	p := newJob("k")
	p.Queue = "mail"
	insertNew(t, s, base, p)
	// A notification travels through the database: wait for the signal,
	// bounded so that a store that never notifies fails instead of hanging.
	select {
	case q := <-ch:
		if q != "mail" {
			t.Fatalf("notification for %q, want mail", q)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
	}
	cancel()
	for range ch { // closes when ctx ends
	}
}
