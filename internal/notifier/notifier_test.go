package notifier_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/internal/notifier"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// chanListener announces the queues sent on its channel.
type chanListener struct {
	ch  chan string
	err error
}

func (l *chanListener) Listen(ctx context.Context) (<-chan string, error) {
	if l.err != nil {
		return nil, l.err
	}
	out := make(chan string)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case q := <-l.ch:
				select {
				case out <- q:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNotifier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("inserted wakes its queue's producer and long polls only", func(t *testing.T) {
		t.Parallel()
		n := notifier.New(nil, nil)
		var a, b atomic.Int32
		n.Subscribe("a", func() { a.Add(1) })
		n.Subscribe("b", func() { b.Add(1) })
		pollA, stopA := n.WaitInserted([]string{"a"})
		defer stopA()
		pollAB, stopAB := n.WaitInserted([]string{"a", "b"})
		defer stopAB()
		pollB, stopB := n.WaitInserted([]string{"b"})
		n.Inserted("a")
		n.Inserted("unknown")
		if a.Load() != 1 || b.Load() != 0 || !closed(pollA) || !closed(pollAB) || closed(pollB) {
			t.Fatalf("a=%d b=%d; polls a %v, a+b %v, b %v", a.Load(), b.Load(), closed(pollA), closed(pollAB), closed(pollB))
		}
		n.Inserted("b") // pollAB was woken and forgotten: not closed twice
		if !closed(pollB) {
			t.Fatal("the poll of b was not woken")
		}
		stopB() // after the wake-up: harmless
		next, stopNext := n.WaitInserted([]string{"b"})
		stopNext() // stopped before any insert: never closed
		n.WakeQueues(nil)
		if closed(next) {
			t.Fatal("a stopped poll was woken")
		}
		all, stopAll := n.WaitInserted([]string{"c"})
		defer stopAll()
		n.WakeQueues(nil)
		n.WakeQueues([]string{"b"})
		if a.Load() != 3 || b.Load() != 4 || !closed(all) {
			t.Fatalf("a=%d b=%d, poll of c woken %v", a.Load(), b.Load(), closed(all))
		}
	})

	t.Run("finished wakes the waiters of that job only", func(t *testing.T) {
		t.Parallel()
		n := notifier.New(nil, nil)
		one, stopOne := n.WaitFinished(1)
		oneAgain, stopOneAgain := n.WaitFinished(1)
		two, stopTwo := n.WaitFinished(2)
		defer stopTwo()
		n.Finished([]int64{1, 3})
		if !closed(one) || !closed(oneAgain) || closed(two) {
			t.Fatal("wrong waiters woken")
		}
		stopOne()
		stopOneAgain() // after the wake-up: harmless
		three, stopThree := n.WaitFinished(3)
		stopThree() // stopped before any finish: never closed
		n.Finished([]int64{3})
		if closed(three) {
			t.Fatal("a stopped waiter was woken")
		}
	})

	t.Run("relays the listener's announcements", func(t *testing.T) {
		t.Parallel()
		l := &chanListener{ch: make(chan string)}
		n := notifier.New(l, nil)
		woken := make(chan string, 1)
		n.Subscribe("q", func() { woken <- "q" })
		poll, stopPoll := n.WaitInserted([]string{"q"})
		defer stopPoll()
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
		<-n.Started()
		l.ch <- "q"
		select {
		case <-woken:
		case <-time.After(10 * time.Second):
			t.Fatal("announcement not relayed")
		}
		select {
		case <-poll:
		case <-time.After(10 * time.Second):
			t.Fatal("announcement not relayed to the long poll")
		}
		n.Stop()
		n.Stop()
	})

	t.Run("a failing listener leaves polling", func(t *testing.T) {
		t.Parallel()
		n := notifier.New(&chanListener{err: errors.New("no listen")}, nil)
		n.Subscribe("q", func() {})
		_ = n.Start(ctx)
		<-n.Stopped() // the relay ends at once
		n.Stop()
	})

	t.Run("without a listener start does nothing", func(t *testing.T) {
		t.Parallel()
		n := notifier.New(nil, nil)
		_ = n.Start(ctx)
		n.Stop()
	})

	t.Run("without queues it listens for long polls", func(t *testing.T) {
		t.Parallel()
		l := &chanListener{ch: make(chan string)}
		n := notifier.New(l, nil) // no subscribed queue, no cancel hook
		poll, stopPoll := n.WaitInserted([]string{"pull"})
		defer stopPoll()
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
		<-n.Started()
		l.ch <- "pull"
		select {
		case <-poll:
		case <-time.After(10 * time.Second):
			t.Fatal("announcement not relayed to the long poll of a notifier without queues")
		}
	})
}
