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

// failingCounters is the real store's counters with writes that fail
// while down is set (failure injection by wrapping the real store).
type failingCounters struct {
	store.Counters
	down  atomic.Bool
	calls atomic.Int64
}

func (f *failingCounters) CounterAdd(ctx context.Context, p *store.CounterAddParams) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errors.New("database is locked")
	}
	return f.Counters.CounterAdd(ctx, p)
}

// TestCacheCountersKeepEveryTenantAfterAFailedFlush: a flush that fails
// keeps, for the next flush, the counts of every tenant it had not tried
// yet, and drops those of the write that failed (it may have committed:
// writing it again could count it twice), so every count is written at
// most once.
func TestCacheCountersKeepEveryTenantAfterAFailedFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openSQLite(t).(store.Counters)
	fc := &failingCounters{Counters: st}
	counts := idemhttp.NewCacheCounters(fc, 0, nil)
	tenants := []string{"a", "b", "c", "d"}
	for _, tn := range tenants {
		counts.ObserveJob(&idem.JobEvent{Type: idem.EventCacheHit, Tenant: tn})
		counts.ObserveJob(&idem.JobEvent{Type: idem.EventCacheHit, Tenant: tn})
		counts.ObserveJob(&idem.JobEvent{Type: idem.EventCacheMiss, Tenant: tn})
	}
	counts.ObserveJob(&idem.JobEvent{Type: idem.EventFinished, Tenant: "a"}) // not a cache event

	fc.down.Store(true)
	if err := counts.Flush(ctx); err == nil {
		t.Fatal("a failing flush reported success")
	}
	fc.down.Store(false)
	if err := counts.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for _, tn := range tenants {
		got, err := st.CounterGet(ctx, &store.CounterGetParams{Tenant: tn})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(got) == 0:
			dropped++ // the tenant whose write failed
		case got[store.CounterCacheHits] != 2 || got[store.CounterCacheMisses] != 1:
			t.Errorf("tenant %s: %v, want 2 hits and 1 miss", tn, got)
		}
	}
	if dropped != 1 {
		t.Errorf("%d tenants without counts, want 1 (the failed write's)", dropped)
	}
	// Nothing is left to write twice.
	before := fc.calls.Load()
	if err := counts.Flush(ctx); err != nil || fc.calls.Load() != before {
		t.Fatalf("an empty flush wrote %d times (%v)", fc.calls.Load()-before, err)
	}
	if err := counts.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	all, _ := st.CounterGet(ctx, &store.CounterGetParams{})
	if all[store.CounterCacheHits] != 6 || all[store.CounterCacheMisses] != 3 {
		t.Fatalf("summed over tenants: %v", all)
	}
}
