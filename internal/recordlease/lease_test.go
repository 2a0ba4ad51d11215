package recordlease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type opener func(t *testing.T) store.Store

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	url, schema := dbtest.NewSchema(t)
	// The tests drive lease expiry with a fake clock: the caller's clock decides.
	st, err := pgstore.Open(context.Background(), url, &pgstore.Config{Schema: schema, CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestLeaseSQLite(t *testing.T) {
	t.Parallel()
	testLease(t, openSQLite)
}

func TestLeasePostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	testLease(t, openPostgres)
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func params(owner string, clock *fakeClock) *Params {
	return &Params{Tenant: "default", Purpose: PurposeDo, Key: "k", Owner: owner,
		Lease: time.Minute, TTL: time.Hour, Now: clock.Now}
}

func testLease(t *testing.T, open opener) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

	t.Run("many goroutines race on one key: exactly one runs", func(t *testing.T) {
		t.Parallel()
		st := open(t)
		const n = 32
		var ran, held atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p := &Params{Tenant: "default", Purpose: PurposeHTTP, Key: "race", Owner: string(rune('A' + i)),
					Lease: time.Minute, TTL: time.Hour}
				l, rec, err := Acquire(ctx, st, p)
				if err != nil {
					t.Error(err)
					return
				}
				if l == nil {
					if rec == nil || rec.LeaseOwner == p.Owner {
						t.Errorf("not acquired, record %+v", rec)
					}
					held.Add(1)
					return
				}
				ran.Add(1)
			}()
		}
		close(start)
		wg.Wait()
		if ran.Load() != 1 || held.Load() != n-1 {
			t.Fatalf("%d ran, %d saw the key held; want 1 and %d", ran.Load(), held.Load(), n-1)
		}
	})

	t.Run("a resumed lease renews while its owner holds the key, then reports ErrLost", func(t *testing.T) {
		t.Parallel()
		st, clock := open(t), &fakeClock{t: t0}
		if l, _, err := Acquire(ctx, st, params("a", clock)); err != nil || l == nil {
			t.Fatalf("acquire: %v %v", l, err)
		}
		r := Resume(st, params("a", clock)) // as another request of owner a would
		clock.Add(30 * time.Second)
		until, err := r.Renew(ctx)
		if err != nil || !until.Equal(clock.Now().Add(time.Minute)) || !r.Until().Equal(until) {
			t.Fatalf("renew: %v until %v (lease until %v), want %v", err, until, r.Until(), clock.Now().Add(time.Minute))
		}
		clock.Add(2 * time.Minute) // the lease lapsed: b takes the key
		if l2, _, err := Acquire(ctx, st, params("b", clock)); err != nil || l2 == nil {
			t.Fatalf("b acquire after expiry: %v %v", l2, err)
		}
		if until, err := r.Renew(ctx); !errors.Is(err, ErrLost) || !until.IsZero() {
			t.Fatalf("renew after b took the key: %v %v, want ErrLost", until, err)
		}
		// Without a clock, Resume uses the real one.
		p := params("c", clock)
		p.Key, p.Now = "k2", nil
		if until, err := Resume(st, p).Renew(ctx); !errors.Is(err, ErrLost) {
			t.Fatalf("renew of a key c never took: %v %v, want ErrLost (a renewal never takes a key)", until, err)
		}
		if l, _, err := Acquire(ctx, st, p); err != nil || l == nil {
			t.Fatalf("c acquire on the real clock: %v %v", l, err)
		}
		if until, err := Resume(st, p).Renew(ctx); err != nil || until.Before(time.Now()) {
			t.Fatalf("renew on the real clock: %v %v", until, err)
		}
	})

	t.Run("a completed key returns its result to later acquirers", func(t *testing.T) {
		t.Parallel()
		st, clock := open(t), &fakeClock{t: t0}
		l, _, err := Acquire(ctx, st, params("a", clock))
		if err != nil || l == nil {
			t.Fatalf("acquire: %v %v", l, err)
		}
		if err := l.Complete(ctx, &Result{Bytes: []byte(`"done"`), Hash: "h"}); err != nil {
			t.Fatal(err)
		}
		l2, rec, err := Acquire(ctx, st, params("b", clock))
		if err != nil || l2 != nil || rec.Status != idemtype.RecordCompleted || string(rec.Result) != `"done"` {
			t.Fatalf("second acquire: %v %+v %v", l2, rec, err)
		}
	})

	t.Run("a released key runs again", func(t *testing.T) {
		t.Parallel()
		st, clock := open(t), &fakeClock{t: t0}
		l, _, err := Acquire(ctx, st, params("a", clock))
		if err != nil || l == nil {
			t.Fatalf("acquire: %v %v", l, err)
		}
		if l2, rec, _ := Acquire(ctx, st, params("b", clock)); l2 != nil || rec.LeaseOwner != "a" {
			t.Fatalf("held key acquired: %v %+v", l2, rec)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if l2, _, err := Acquire(ctx, st, params("b", clock)); err != nil || l2 == nil {
			t.Fatalf("released key not acquired: %v", err)
		}
	})

	t.Run("hold renews the lease past its duration", func(t *testing.T) {
		t.Parallel()
		st, clock := open(t), &fakeClock{t: t0}
		p := params("a", clock)
		p.Lease = 30 * time.Millisecond // the renewer ticks every 10ms of real time
		renewed := make(chan error)
		p.renewed = renewed
		l, _, err := Acquire(ctx, st, p)
		if err != nil || l == nil {
			t.Fatalf("acquire: %v %v", l, err)
		}
		stop := l.Hold(ctx, nil)
		for range 3 { // each renewal is seen on the fake clock 20ms later
			clock.Add(20 * time.Millisecond)
			if err := <-renewed; err != nil {
				t.Fatal(err)
			}
		}
		stop()
		// 60ms on the clock, twice the lease: without renewal it had lapsed.
		if l2, rec, err := Acquire(ctx, st, params("b", clock)); err != nil || l2 != nil || rec.LeaseOwner != "a" {
			t.Fatalf("renewed lease taken over: %v %+v %v", l2, rec, err)
		}
		clock.Add(time.Second)
		if l2, _, err := Acquire(ctx, st, params("b", clock)); err != nil || l2 == nil {
			t.Fatalf("lapsed lease not taken over: %v", err)
		}
	})

	t.Run("hold reports a lease another owner took over", func(t *testing.T) {
		t.Parallel()
		st, clock := open(t), &fakeClock{t: t0}
		p := params("a", clock)
		p.Lease = 30 * time.Millisecond
		renewed := make(chan error, 1)
		p.renewed = renewed
		l, _, err := Acquire(ctx, st, p)
		if err != nil || l == nil {
			t.Fatalf("acquire: %v %v", l, err)
		}
		// The lease lapses on the clock and b takes the key before a renews.
		clock.Add(time.Second)
		if l2, _, err := Acquire(ctx, st, params("b", clock)); err != nil || l2 == nil {
			t.Fatalf("take over: %v", err)
		}
		lost := make(chan error, 1)
		stop := l.Hold(ctx, func(err error) { lost <- err })
		if err := <-renewed; !errors.Is(err, ErrLost) {
			t.Fatalf("renewal: %v", err)
		}
		stop()
		if err := <-lost; !errors.Is(err, idemtype.ErrLeaseLost) {
			t.Fatalf("onErr got %v", err)
		}
		if err := l.Complete(ctx, &Result{Bytes: []byte(`1`)}); !errors.Is(err, idemtype.ErrLeaseLost) {
			t.Fatalf("complete after loss: %v", err)
		}
	})

	t.Run("keys of different purposes never meet", func(t *testing.T) {
		t.Parallel()
		st, clock := open(t), &fakeClock{t: t0}
		for _, purpose := range []Purpose{PurposeJob, PurposeHTTP, PurposeDo, PurposeSchedule} {
			p := params("o-"+string(purpose), clock)
			p.Purpose = purpose
			if l, rec, err := Acquire(ctx, st, p); err != nil || l == nil {
				t.Fatalf("purpose %q: key held by %+v (%v)", purpose, rec, err)
			}
		}
	})
}

func TestKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		purpose Purpose
		key     string
		want    string
	}{
		{PurposeJob, "http:K", "http:K"},
		{PurposeHTTP, "http:K", "\x1fhttp\x1fhttp:K"},
		{PurposeDo, "K", "\x1fdo\x1fK"},
		{PurposeSchedule, "K", "\x1fschedule\x1fK"},
	}
	for _, tt := range tests {
		if got := Key(tt.purpose, tt.key); got != tt.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tt.purpose, tt.key, got, tt.want)
		}
	}
}
