package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// flowSetup is a store with n available jobs of tenant "default" in queue
// "default" (run at t0).
func flowSetup(t *testing.T, n int) *Store {
	t.Helper()
	s := openTest(t, nil)
	fillJobs(t, s, n)
	return s
}

func fillJobs(t *testing.T, s *Store, n int) {
	t.Helper()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = job("flow")
	}
	insert(t, s, t0, ps...)
}

// openFile opens a store on the file at path (closed when the test ends).
func openFile(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func putLimit(t *testing.T, s *Store, l store.Limit) {
	t.Helper()
	if _, err := s.LimitPut(context.Background(), &store.LimitPutParams{Limit: l}); err != nil {
		t.Fatalf("LimitPut: %v", err)
	}
}

// queueRate is a rate limit of rate jobs per hour on queue "default".
func queueRate(rate int) store.Limit {
	return store.Limit{FlowScope: store.FlowScope{Queue: "default"}, Rate: rate, Period: time.Hour}
}

// windowUsed reads the stored window of the limit of queue "default".
func windowUsed(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(`SELECT window_used FROM flow_controls WHERE tenant = '' AND queue = 'default'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFlowCacheSeesEveryChange: claims keep the flow-control rows between
// claims; every way the rows change takes effect on the next claim.
func TestFlowCacheSeesEveryChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("limit put, paused, resumed, deleted", func(t *testing.T) {
		t.Parallel()
		s := flowSetup(t, 20)
		putLimit(t, s, queueRate(3))
		if got := len(claim(t, s, t0, 10)); got != 3 {
			t.Fatalf("claimed %d under rate 3, want 3", got)
		}
		putLimit(t, s, queueRate(5)) // same period and another rate: a new window
		if got := len(claim(t, s, t0, 2)); got != 2 {
			t.Fatalf("claimed %d of 2 after the rate became 5", got)
		}
		pause := &store.QueuePauseParams{Scope: store.FlowScope{Queue: "default"}}
		if err := s.QueuePause(ctx, pause); err != nil {
			t.Fatal(err)
		}
		if got := len(claim(t, s, t0, 10)); got != 0 {
			t.Fatalf("claimed %d from a paused queue", got)
		}
		if err := s.QueueResume(ctx, pause); err != nil {
			t.Fatal(err)
		}
		if got := len(claim(t, s, t0, 10)); got != 3 {
			t.Fatalf("claimed %d after the queue was resumed, want the 3 left of rate 5", got)
		}
		if err := s.LimitDelete(ctx, &store.LimitDeleteParams{Scope: store.FlowScope{Queue: "default"}}); err != nil {
			t.Fatal(err)
		}
		if got := len(claim(t, s, t0, 10)); got != 10 {
			t.Fatalf("claimed %d after the limit was deleted, want 10", got)
		}
	})
	t.Run("claims count what they claimed", func(t *testing.T) {
		t.Parallel()
		s := flowSetup(t, 20)
		putLimit(t, s, queueRate(7))
		for i, want := range []int{3, 3, 1, 0} {
			if got := len(claim(t, s, t0, 3)); got != want {
				t.Fatalf("claim %d took %d, want %d", i, got, want)
			}
		}
		if got := windowUsed(t, s); got != 7 {
			t.Fatalf("window_used %d, want 7", got)
		}
	})
	t.Run("more usage rows than one statement writes", func(t *testing.T) {
		t.Parallel()
		s := openTest(t, nil)
		const tenants = 2*usageRowsMax + 3
		// A default limit too: its windows are written per tenant.
		putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "default"}, Rate: 1, Period: time.Hour})
		var ps []*store.JobInsertParams
		for i := range tenants {
			putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: fmt.Sprintf("t%03d", i)}, Rate: 2, Period: time.Hour})
			for range 3 {
				p := job("flow")
				p.Tenant = fmt.Sprintf("t%03d", i)
				ps = append(ps, p)
			}
		}
		insert(t, s, t0, ps...)
		if got := len(claim(t, s, t0, 1000)); got != tenants {
			t.Fatalf("claimed %d, want one per tenant (the default's rate 1)", got)
		}
		if got := len(claim(t, s, t0, 1000)); got != 0 {
			t.Fatalf("claimed %d more with every window spent", got)
		}
		var own, inherited int
		if err := s.rdb.QueryRow(`SELECT sum(window_used) FROM flow_controls WHERE tenant LIKE 't%'`).Scan(&own); err != nil {
			t.Fatal(err)
		}
		if err := s.rdb.QueryRow(`SELECT sum(window_used) FROM flow_default_windows`).Scan(&inherited); err != nil {
			t.Fatal(err)
		}
		if own != tenants || inherited != tenants {
			t.Fatalf("windows used: %d of the tenants' limits, %d of the default, want %d each", own, inherited, tenants)
		}
	})
	t.Run("another store on the same file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "idem.db")
		first := openFile(t, path)
		fillJobs(t, first, 20)
		putLimit(t, first, queueRate(4))
		if got := len(claim(t, first, t0, 2)); got != 2 {
			t.Fatalf("first claim took %d, want 2", got)
		}
		second := openFile(t, path) // without the process lock, as another process
		if got := len(claim(t, second, t0, 1)); got != 1 {
			t.Fatalf("the second store's claim took %d, want 1", got)
		}
		if got := len(claim(t, first, t0, 10)); got != 1 {
			t.Fatalf("the first store took %d of what the second left, want 1", got)
		}
		putLimit(t, second, queueRate(6)) // a new window of 6
		if got := len(claim(t, first, t0, 10)); got != 6 {
			t.Fatalf("the first store took %d after the second put rate 6, want 6", got)
		}
	})
	t.Run("tenants' windows under a default", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "idem.db")
		first := openFile(t, path)
		var ps []*store.JobInsertParams
		for range 30 {
			p := job("flow")
			p.Tenant = "acme"
			ps = append(ps, p)
		}
		insert(t, first, t0, ps...)
		every := store.FlowScope{Tenant: store.EveryTenant}
		putLimit(t, first, store.Limit{FlowScope: every, Rate: 3, Period: time.Hour})
		if got := len(claim(t, first, t0, 2)); got != 2 {
			t.Fatalf("first claim took %d, want 2", got)
		}
		second := openFile(t, path) // without the process lock, as another process
		if got := len(claim(t, second, t0, 10)); got != 1 {
			t.Fatalf("the second store's claim took %d, want the 1 left of acme's window", got)
		}
		if got := len(claim(t, first, t0, 10)); got != 0 {
			t.Fatalf("the first store took %d of a window the second spent", got)
		}
		putLimit(t, second, store.Limit{FlowScope: every, Rate: 5, Period: time.Hour}) // new windows of 5
		if got := len(claim(t, first, t0, 10)); got != 5 {
			t.Fatalf("the first store took %d after the second put rate 5, want 5", got)
		}
		err := first.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE flow_default_windows SET window_used = 3`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(claim(t, first, t0, 10)); got != 2 {
			t.Fatalf("claimed %d after a transaction set acme's window to 3 used, want 2", got)
		}
		if got := len(claim(t, first, t0.Add(time.Hour), 10)); got != 5 {
			t.Fatalf("claimed %d in the next window, want 5", got)
		}
	})
	t.Run("a caller's transaction", func(t *testing.T) {
		t.Parallel()
		s := flowSetup(t, 20)
		putLimit(t, s, queueRate(2))
		if got := len(claim(t, s, t0, 10)); got != 2 {
			t.Fatalf("claimed %d under rate 2, want 2", got)
		}
		err := s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE flow_controls SET window_used = 0 WHERE tenant = '' AND queue = 'default'`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(claim(t, s, t0, 10)); got != 2 {
			t.Fatalf("claimed %d after a transaction reset the window, want 2", got)
		}
	})
	t.Run("a rolled back claim", func(t *testing.T) {
		t.Parallel()
		s := flowSetup(t, 20)
		putLimit(t, s, queueRate(4))
		errFail := errors.New("fails after its claim") // not a logical error: the writer rolls back
		err := s.write(ctx, 1, func(t *wtx) error {
			p := &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 3, LeaseUntil: t0.Add(time.Minute), Now: t0}
			if _, err := s.claimFair(t, p, toUS(t0)); err != nil {
				return err
			}
			return errFail
		})
		if !errors.Is(err, errFail) {
			t.Fatalf("write: %v, want the op's failure", err)
		}
		if got := windowUsed(t, s); got != 0 {
			t.Fatalf("window_used %d after a rolled back claim, want 0", got)
		}
		if got := len(claim(t, s, t0, 10)); got != 4 {
			t.Fatalf("claimed %d after a rolled back claim, want the whole rate 4", got)
		}
	})
}

// TestFlowCacheInheritedWindows: tenants' windows under defaults that
// claims add to the cache in any order are found by scope while current,
// and the spent ones come out sorted by tenant and queue, with the usage
// last written.
func TestFlowCacheInheritedWindows(t *testing.T) {
	hour := store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant}, Rate: 10, Period: time.Hour}
	minute := store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "q"}, Rate: 10, Period: time.Minute}
	c := &flowCache{valid: true, winValid: true, winAt: map[store.FlowScope]int{},
		rows:  []flowRow{{limit: hour}, {limit: minute}},
		index: map[store.FlowScope]int{hour.FlowScope: 0, minute.FlowScope: 1}}
	now := t0.Truncate(time.Hour).Add(30 * time.Minute)
	use := func(tenant, queue string, at time.Time, used int) store.LimitUsage {
		return store.LimitUsage{Scope: store.FlowScope{Tenant: tenant, Queue: queue}, WindowStart: at, WindowUsed: used,
			Inherited: true}
	}
	hourStart, minuteStart := now.Truncate(time.Hour), now.Truncate(time.Minute)
	c.put([]store.LimitUsage{
		use("m", "", hourStart, 1), use("c", "q", minuteStart, 12), use("x", "", hourStart, 3),
		use("a", "q", minuteStart.Add(-time.Minute), 20), // a past window: not current
		use("c", "", hourStart, 5), use("a", "", hourStart, 6),
	})
	c.put([]store.LimitUsage{use("m", "", hourStart, 7), use("c", "", hourStart, 10)}) // written again
	window, spent, err := c.inheritedWindows(nil, toUS(now))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range spent {
		names = append(names, fmt.Sprintf("%s/%s=%d", w.Tenant, w.Queue, w.WindowUsed))
	}
	if want := []string{"c/=10", "c/q=12"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("spent windows %v, want %v", names, want)
	}
	for _, tc := range []struct {
		tenant, queue string
		used          int // -1: none
	}{{"a", "", 6}, {"a", "q", -1}, {"m", "", 7}, {"x", "", 3}, {"c", "q", 12}, {"z", "", -1}, {"m", "q", -1}} {
		w, ok := window(store.FlowScope{Tenant: tc.tenant, Queue: tc.queue})
		if got := map[bool]int{true: w.WindowUsed, false: -1}[ok]; got != tc.used {
			t.Errorf("window of %s/%s: used %d, want %d", tc.tenant, tc.queue, got, tc.used)
		}
	}
	for scope, i := range c.winAt {
		if w := c.windows[i]; w.Tenant != scope.Tenant || w.Queue != scope.Queue {
			t.Fatalf("winAt[%v] = %d holds %s/%s", scope, i, w.Tenant, w.Queue)
		}
	}
}
