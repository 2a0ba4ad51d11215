package idemhttp_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
)

// lostAnswerCounters is the real store's counters whose writes, while
// lose is set, commit and then answer an error, as a PostgreSQL commit
// whose answer the network lost (failure injection by wrapping the real
// store: the write itself is real).
type lostAnswerCounters struct {
	store.Counters
	lose atomic.Bool
}

func (l *lostAnswerCounters) CounterAdd(ctx context.Context, p *store.CounterAddParams) error {
	if err := l.Counters.CounterAdd(ctx, p); err != nil {
		return err
	}
	if l.lose.Load() {
		return errors.New("unexpected EOF")
	}
	return nil
}

// TestCacheCountersLostAnswerCountsOnce: a flush whose write committed but
// whose answer was lost is not written again by the next flush (it would
// count the same hits twice); the counts observed after it are written
// once. On both stores.
func TestCacheCountersLostAnswerCountsOnce(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := open(t).(store.Counters)
			lc := &lostAnswerCounters{Counters: st}
			counts := idemhttp.NewCacheCounters(lc, 0, nil)
			for range 3 {
				counts.ObserveJob(&idem.JobEvent{Type: idem.EventCacheHit, Tenant: "a"})
			}
			counts.ObserveJob(&idem.JobEvent{Type: idem.EventCacheMiss, Tenant: "a"})
			lc.lose.Store(true)
			if err := counts.Flush(ctx); err == nil {
				t.Fatal("a flush whose answer was lost reported success")
			}
			lc.lose.Store(false)
			counts.ObserveJob(&idem.JobEvent{Type: idem.EventCacheHit, Tenant: "a"})
			if err := counts.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := st.CounterGet(ctx, &store.CounterGetParams{Tenant: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if got[store.CounterCacheHits] != 4 || got[store.CounterCacheMisses] != 1 {
				t.Fatalf("counters %v, want 4 hits and 1 miss (each counted once)", got)
			}
		})
	}
}

// TestCacheCountersStopAfterGrace: Stop called with a context the
// shutdown already used up (idem serve passes what client.Stop left of
// the grace) still writes the last counts, on a short context of its own,
// instead of failing at once and losing them with the process.
func TestCacheCountersStopAfterGrace(t *testing.T) {
	t.Parallel()
	st := openSQLite(t).(store.Counters)
	counts := idemhttp.NewCacheCounters(st, 0, nil)
	counts.Start(context.Background())
	counts.ObserveJob(&idem.JobEvent{Type: idem.EventCacheHit, Tenant: "a"})
	spent, cancel := context.WithCancel(context.Background())
	cancel()
	if err := counts.Stop(spent); err != nil {
		t.Fatalf("Stop after the grace: %v", err)
	}
	got, err := st.CounterGet(context.Background(), &store.CounterGetParams{Tenant: "a"})
	if err != nil || got[store.CounterCacheHits] != 1 {
		t.Fatalf("counters %v (%v), want the last hit written", got, err)
	}
}
