package idemhttp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// writeProbeName is the leader row name /readyz's write probe resigns: no
// node ever leads it, so the probe's DELETE matches no row and writes
// nothing, yet it needs a writable database (a write transaction on
// SQLite, a read-write transaction on PostgreSQL).
const writeProbeName = "idem.readyz-probe"

// writeTracker remembers when an API write last failed with a storage
// failure and when one last succeeded.
type writeTracker struct {
	mu       sync.Mutex
	failedAt time.Time
	okAt     time.Time
	lastErr  error
}

// note records the outcome of one request: only writes (not GET or HEAD)
// count, and only storage failures count as failed.
func (w *writeTracker) note(method string, err error, now time.Time) {
	if method == http.MethodGet || method == http.MethodHead {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.okAt = now
	case errors.Is(err, idemtype.ErrUnavailable):
		w.failedAt, w.lastErr = now, err
	}
}

// failing returns the storage failure of a write within window before now
// that no successful write followed, or nil.
func (w *writeTracker) failing(now time.Time, window time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr == nil || !w.failedAt.After(w.okAt) || now.Sub(w.failedAt) > window {
		return nil
	}
	return w.lastErr
}

// writeCheck is /readyz's "writes" check: the write probe must succeed
// (when the store is a store.Leader, as both stores are) and no recent API
// write may have failed with a storage failure.
func (s *Server) writeCheck(ctx context.Context) Check {
	if l, ok := s.store.(store.Leader); ok {
		err := l.LeaderResign(ctx, &store.LeaderResignParams{Name: writeProbeName, Owner: writeProbeName})
		if err != nil {
			return Check{Status: StatusUnhealthy, Detail: "the write probe failed: " + err.Error()}
		}
	}
	if err := s.writes.failing(s.now(), s.cfg.ReadyWriteWindow); err != nil {
		return Check{Status: StatusUnhealthy, Threshold: s.cfg.ReadyWriteWindow.Seconds(),
			Detail: "a write failed with a storage failure within the window: " + err.Error()}
	}
	return Check{Status: StatusHealthy, Threshold: s.cfg.ReadyWriteWindow.Seconds()}
}
