package sqlitestore

import (
	"slices"
	"sync"

	"github.com/idem-dev/idem/store"
)

var _ store.Announcer = (*Store)(nil)

// announcers are the functions told of the queues where a write of this
// store made a job available that its caller cannot see through (see
// store.Announcer): SQLite has no NOTIFY, and no other process hears it.
type announcers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(queues []string)
}

// Announce implements store.Announcer: fn is told, after each commit, the
// queues whose slots or FIFO partitions a cancelled job stopped holding (JobRescue
// ending a hold; a refused finish acknowledging a cancel, also through
// JobFinishManyTx once its WriteTx committed), and the queues of the
// pending dependants a write released: by a finish (completion, death),
// a cancel, a rescue to dead, such an end of a hold, or
// JobDependantsRepair; and the queues where a JobClaim left available due
// jobs it promoted (the other claimers of the queue take them).
func (s *Store) Announce(fn func(queues []string)) (stop func()) {
	a := &s.ann
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fns == nil {
		a.fns = map[int]func([]string){}
	}
	a.next++
	id := a.next
	a.fns[id] = fn
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.fns, id)
	}
}

// announce tells the announcers the queues (each once); called after the
// commit that made their jobs available.
func (s *Store) announce(queues []string) {
	if len(queues) == 0 {
		return
	}
	queues = slices.Clone(queues)
	slices.Sort(queues)
	queues = slices.Compact(queues)
	a := &s.ann
	a.mu.Lock()
	fns := make([]func([]string), 0, len(a.fns))
	for _, fn := range a.fns {
		fns = append(fns, fn)
	}
	a.mu.Unlock()
	for _, fn := range fns {
		fn(queues)
	}
}
