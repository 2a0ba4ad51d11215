package leadership_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/leadership"
	"github.com/idem-dev/idem/store"
)

// cutAfterCommit is a store whose LeaderAttempt, once cut is closed, writes
// the term and then answers only when its context ends: a renewal that
// committed while the caller was stopping (its answer lost to the
// cancellation).
type cutAfterCommit struct {
	store.Store
	cut     chan struct{}
	waiting chan struct{} // a committed attempt waits for its context
}

func (s *cutAfterCommit) LeaderAttempt(ctx context.Context, p *store.LeaderParams) (bool, error) {
	ok, err := s.Store.LeaderAttempt(context.WithoutCancel(ctx), p)
	select {
	case <-s.cut:
	default:
		return ok, err
	}
	s.waiting <- struct{}{}
	<-ctx.Done()
	return false, ctx.Err()
}

// TestElectorStopResignsARenewalCutOff: a leader stopped while a renewal
// is in flight resigns even though the cancelled renewal's answer was
// lost: its term was written, and another node took over only when it ran
// out (a graceful stop handed over leadership a whole TTL late).
func TestElectorStopResignsARenewalCutOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &cutAfterCommit{Store: openStore(t), cut: make(chan struct{}), waiting: make(chan struct{}, 1)}
	// A fixed clock: the term never runs out by the store's (caller's)
	// clock, only a resignation ends it.
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := leadership.New(st, leadership.Config{Owner: "a", TTL: 300 * time.Millisecond, Now: clock})
	a.TestSignals.Attempted.Init()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !a.TestSignals.Attempted.WaitOrTimeout(t) {
		t.Fatal("a lone elector does not lead")
	}
	close(st.cut)
	select { // the next renewal, every TTL/3
	case <-st.waiting:
	case <-time.After(time.Minute):
		t.Fatal("no renewal")
	}
	a.Stop()
	b := leadership.New(st.Store, leadership.Config{Owner: "b", TTL: time.Hour, Now: clock})
	if ok, err := b.RunOnce(ctx); !ok || err != nil {
		t.Fatalf("b cannot lead after a stopped: %v %v", ok, err)
	}
}
