// Package notifier carries the wake-ups of a process: a job inserted or
// promoted wakes the producer of its queue, a long-polling pull claim, and
// a finished job wakes those waiting for it (idem.Client.JobWait). Stores
// that announce inserts from other processes (pgstore: LISTEN/NOTIFY)
// implement Listener; the notifier then relays their announcements as local
// wake-ups, and their announcements of cancelled running jobs
// (store.CancelNotice) to the cancel hook (SubscribeCancels). Polling stays
// the fallback for everything the notifier cannot hear (SQLite writes by
// other processes, jobs finished elsewhere); heartbeats, for cancels.
package notifier

import (
	"context"
	"log/slog"
	"sync"

	"github.com/idem-dev/idem/internal/startstop"
	"github.com/idem-dev/idem/store"
)

// Listener is implemented by stores that announce new jobs from other
// processes: the channel carries the queue of each insert until ctx ends.
type Listener interface {
	Listen(ctx context.Context) (<-chan string, error)
}

// Notifier routes wake-ups. Its zero value is not usable; call New.
type Notifier struct {
	startstop.BaseStartStop
	listener Listener // nil: local wake-ups only
	logger   *slog.Logger

	// announcer is the store's own announcements (store.Announcer; nil:
	// none), heard only while a producer or long poll waits (unannounce
	// set): a notifier nobody waits on holds no subscription, so clients
	// come and go on one store without accumulating them.
	announcer  store.Announcer
	unannounce func()

	mu       sync.Mutex
	queues   map[string]func()              // the wake-up of each queue's producer
	polls    map[string]map[*poll]struct{}  // long-polling claims by queue
	cancels  func(store.Lease)              // the cancel hook (nil: none)
	resync   func()                         // told when announcements may have been lost
	finished map[int64]map[*waiter]struct{} // JobWait waiters by job id
}

type waiter struct{ ch chan struct{} }

// poll is a long-polling claim waiting for a job in one of its queues.
type poll struct {
	ch     chan struct{} // closed at the wake-up
	queues []string
}

// New returns a notifier; l may be nil (no remote announcements).
func New(l Listener, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.Default()
	}
	return &Notifier{listener: l, logger: logger, queues: map[string]func(){},
		polls: map[string]map[*poll]struct{}{}, finished: map[int64]map[*waiter]struct{}{}}
}

// Relay makes the notifier relay a's announcements (the queues where a
// write of this store made a job available; SQLite has no Listener) as
// local wake-ups. It subscribes to a only while a producer is subscribed
// (Subscribe, until Unsubscribe) or a long poll waits (WaitInserted), and
// ends the subscription when the last one leaves. Call it once, before use.
func (n *Notifier) Relay(a store.Announcer) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.announcer = a
	n.followAnnouncer()
}

// followAnnouncer subscribes to the announcer when someone waits for
// wake-ups and ends the subscription when nobody does; n.mu is held. The
// announcer calls WakeQueues outside its own lock (store.Announcer), so
// taking that lock here under n.mu cannot deadlock.
func (n *Notifier) followAnnouncer() {
	if n.announcer == nil {
		return
	}
	want := len(n.queues) > 0 || len(n.polls) > 0
	switch {
	case want && n.unannounce == nil:
		n.unannounce = n.announcer.Announce(n.WakeQueues)
	case !want && n.unannounce != nil:
		n.unannounce()
		n.unannounce = nil
	}
}

// Subscribe makes wake the wake-up of queue (one per queue).
func (n *Notifier) Subscribe(queue string, wake func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.queues[queue] = wake
	n.followAnnouncer()
}

// Unsubscribe forgets the wake-up of queue (its producer stopped).
func (n *Notifier) Unsubscribe(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.queues, queue)
	n.followAnnouncer()
}

// SubscribeCancels makes cancel the hook told of each running job cancelled
// in any process (store.CancelNotice), and resync the one told when such
// announcements may have been lost (the listener connected, first or
// again). Neither may block: the next announcements wait for them.
func (n *Notifier) SubscribeCancels(cancel func(store.Lease), resync func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cancels, n.resync = cancel, resync
}

// Start relays the listener's announcements until Stop; without a listener
// it does nothing. It listens also without subscribed queues or cancel
// hook: long-polling claims (a server's pull workers) wait for other
// processes' jobs too.
func (n *Notifier) Start(ctx context.Context) error {
	if n.listener == nil {
		return nil
	}
	ctx, shouldStart, started, stopped := n.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	go func() {
		started()
		defer stopped()
		n.listen(ctx)
	}()
	return nil
}

// listen wakes the producer and the long polls of every queue the store
// announces and tells
// the cancel hook of every cancelled running job, in the order announced: a
// cancel comes before the queue its transaction made work available in, so
// the cancelled handler is told before that queue's producer wakes.
func (n *Notifier) listen(ctx context.Context) {
	ch, err := n.listener.Listen(ctx)
	if err != nil {
		n.logger.Warn("listen for new jobs failed; polling only", "err", err)
		return
	}
	// Cancels committed before the LISTEN was in place (the producers start
	// first) were announced to nobody.
	n.resynced()
	for v := range ch {
		if lease, ok := store.ParseCancelNotice(v); ok {
			n.mu.Lock()
			cancel := n.cancels
			n.mu.Unlock()
			if cancel != nil {
				cancel(lease)
			}
			continue
		}
		if v == "" { // reconnected: announcements may have been lost
			n.WakeQueues(nil)
			n.resynced()
			continue
		}
		n.WakeQueues([]string{v})
	}
}

// resynced tells the resync hook that announcements may have been lost.
func (n *Notifier) resynced() {
	n.mu.Lock()
	resync := n.resync
	n.mu.Unlock()
	if resync != nil {
		resync()
	}
}

// Inserted tells the long-polling claims and the producer of queue that a
// job may be available there.
func (n *Notifier) Inserted(queue string) { n.WakeQueues([]string{queue}) }

// WaitInserted returns a channel closed at the next job announced in one
// of queues (inserted, promoted, released; by this process or, through the
// listener, another), and the function that stops waiting (call it when
// done either way). Take it before looking for jobs, so that one made
// between the look and the wait is not missed.
func (n *Notifier) WaitInserted(queues []string) (<-chan struct{}, func()) {
	p := &poll{ch: make(chan struct{}), queues: queues}
	n.mu.Lock()
	for _, q := range queues {
		ps := n.polls[q]
		if ps == nil {
			ps = map[*poll]struct{}{}
			n.polls[q] = ps
		}
		ps[p] = struct{}{}
	}
	n.followAnnouncer()
	n.mu.Unlock()
	return p.ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.dropPoll(p)
		n.followAnnouncer()
	}
}

// dropPoll forgets p in every queue it waits on; n.mu is held.
func (n *Notifier) dropPoll(p *poll) {
	for _, q := range p.queues {
		if ps := n.polls[q]; ps != nil {
			delete(ps, p)
			if len(ps) == 0 {
				delete(n.polls, q)
			}
		}
	}
}

// wakePoll closes p's channel (once: it is then forgotten); n.mu is held.
func (n *Notifier) wakePoll(p *poll) {
	close(p.ch)
	n.dropPoll(p)
}

// WakeQueues wakes the producers and long polls of the named queues, or of
// every queue for nil.
func (n *Notifier) WakeQueues(queues []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.followAnnouncer() // the polls woken are gone
	if queues == nil {
		for _, wake := range n.queues {
			wake()
		}
		for _, ps := range n.polls {
			for p := range ps {
				n.wakePoll(p)
			}
		}
		return
	}
	for _, q := range queues {
		if wake := n.queues[q]; wake != nil {
			wake()
		}
		for p := range n.polls[q] {
			n.wakePoll(p)
		}
	}
}

// WaitFinished returns a channel closed when Finished reports job id, and
// the function that stops waiting (call it when done either way).
func (n *Notifier) WaitFinished(id int64) (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{})}
	n.mu.Lock()
	ws := n.finished[id]
	if ws == nil {
		ws = map[*waiter]struct{}{}
		n.finished[id] = ws
	}
	ws[w] = struct{}{}
	n.mu.Unlock()
	return w.ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if ws := n.finished[id]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(n.finished, id)
			}
		}
	}
}

// Finished wakes the waiters of the given jobs: their finishes were written.
func (n *Notifier) Finished(ids []int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.finished) == 0 {
		return
	}
	for _, id := range ids {
		for w := range n.finished[id] {
			close(w.ch)
		}
		delete(n.finished, id)
	}
}
