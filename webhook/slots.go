package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// targetSlots holds one semaphore per target, created on first use and
// dropped when its last user releases it.
type targetSlots struct {
	size int
	mu   sync.Mutex
	sems map[string]*targetSem
}

// targetSem is a semaphore with a count of users holding or awaiting it.
type targetSem struct {
	ch    chan struct{}
	users int
}

func newTargetSlots(size int) *targetSlots {
	return &targetSlots{size: size, sems: map[string]*targetSem{}}
}

// acquire takes a slot of target, waiting up to wait (not at all when
// negative) or until ctx ends. The returned func releases it.
func (t *targetSlots) acquire(ctx context.Context, target string, wait time.Duration) (func(), error) {
	sem := t.join(target)
	select {
	case sem.ch <- struct{}{}:
		return func() { <-sem.ch; t.leave(target, sem) }, nil
	default:
	}
	if wait < 0 {
		t.leave(target, sem)
		return nil, fmt.Errorf("%w: %s", ErrTargetBusy, target)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case sem.ch <- struct{}{}:
		return func() { <-sem.ch; t.leave(target, sem) }, nil
	case <-timer.C:
		t.leave(target, sem)
		return nil, fmt.Errorf("%w: %s", ErrTargetBusy, target)
	case <-ctx.Done():
		t.leave(target, sem)
		return nil, fmt.Errorf("wait for slot: %w", ctx.Err())
	}
}

// join returns target's semaphore, counting one more user.
func (t *targetSlots) join(target string) *targetSem {
	t.mu.Lock()
	defer t.mu.Unlock()
	sem, ok := t.sems[target]
	if !ok {
		sem = &targetSem{ch: make(chan struct{}, t.size)}
		t.sems[target] = sem
	}
	sem.users++
	return sem
}

// leave counts one user fewer and forgets an unused semaphore.
func (t *targetSlots) leave(target string, sem *targetSem) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sem.users--
	if sem.users == 0 {
		delete(t.sems, target)
	}
}
