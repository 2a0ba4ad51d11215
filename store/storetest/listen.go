package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// listenCases test the optional store.Listener capability. A store that
// does not implement it skips them (by capability, not by backend name).
func listenCases() []testCase {
	return []testCase{
		{"Listener/insert_notifies_its_queue", testListenInsert},
		{"Listener/finish_releasing_a_dependant_notifies_its_queue", testListenReleasedDependant},
		{"Listener/cancel_of_a_running_job_announces_its_lease", testListenCancelRunning},
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

// testListenReleasedDependant: a completion that makes a pending dependant
// available notifies the dependant's queue (workers of that queue may be
// idle, waiting for exactly this).
func testListenReleasedDependant(t *testing.T, s store.Store) {
	l := listener(t, s)
	parent := insertNew(t, s, base, newJob("parent"))[0]
	child := newJob("child")
	child.Queue = "after"
	child.DependsOn = []int64{parent.ID}
	insertNew(t, s, base, child)
	running := claimJob(t, s, parent, at(time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := l.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	finish1(t, s, completion(running, `1`, at(2*time.Second)))
	deadline := time.After(10 * time.Second) // a store that never notifies fails instead of hanging
	for {
		select {
		case q := <-ch:
			if q == "after" || q == "" { // "" = any queue may have jobs
				return
			}
		case <-deadline:
			t.Fatal("no notification for the released dependant's queue within 10s")
		}
	}
}

// testListenCancelRunning: the cancel of a running job announces the lease
// it voided (store.CancelNotice), so the process running its handler —
// whichever it is — cancels it at once instead of at its next heartbeat;
// the notice comes before the queue the cancel made work available in (a
// listener stops the handler before it wakes a producer: the partition's
// next job; here a job waiting for any outcome of it, released when its
// handler's refused finish ends the cancel's hold). The cancel of a job
// that is not running announces nothing.
func testListenCancelRunning(t *testing.T, s store.Store) {
	l := listener(t, s)
	idle := newJob("idle")
	idle.Queue = "idle"
	js := insertNew(t, s, base, newJob("run"), idle)
	child := newJob("child")
	child.Queue = "after"
	child.DependsOn = []int64{js[0].ID}
	child.DependsOnFinished = true
	insertNew(t, s, base, child)
	running := claimJob(t, s, js[0], at(time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := l.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: js[1].ID, Reason: "stop", Now: at(2 * time.Second)}); err != nil {
		t.Fatalf("cancel idle: %v", err)
	}
	if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: running.ID, Reason: "stop", Now: at(2 * time.Second)}); err != nil {
		t.Fatalf("cancel running: %v", err)
	}
	// The handler returns: its refused finish ends the cancel's hold and
	// releases the child, which waits for any outcome.
	if errs := finishAll(t, s, completion(running, `1`, at(3*time.Second))); !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish of the cancelled job: %v, want ErrLeaseLost", errs[0])
	}
	var got []string
	deadline := time.After(10 * time.Second) // a store that never notifies fails instead of hanging
	for {
		select {
		case v := <-ch:
			got = append(got, v)
		case <-deadline:
			t.Fatalf("got %q within 10s, want the cancel notice of %+v then queue after", got, leaseOf(running))
		}
		if v := got[len(got)-1]; v != "after" && v != "" {
			continue
		}
		break
	}
	var notices []store.Lease
	for _, v := range got {
		if l, ok := store.ParseCancelNotice(v); ok {
			notices = append(notices, l)
		}
	}
	if len(notices) != 1 || notices[0] != leaseOf(running) {
		t.Fatalf("notifications %q: want exactly one cancel notice, of the running job's lease %+v, before its dependant's queue",
			got, leaseOf(running))
	}
	if _, ok := store.ParseCancelNotice(got[len(got)-1]); ok || got[len(got)-1] != "after" {
		t.Fatalf("notifications %q, want the dependant's queue after the notice", got)
	}
}
