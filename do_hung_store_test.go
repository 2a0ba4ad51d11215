package idem_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// hungRecords is a real store whose record writes (a lease's renewal, a
// result's completion, a key's release) block, once hang is set, until
// their context ends, as on a PostgreSQL connection that never answers or
// behind a SQLite writer that is stuck. unblock (closed at cleanup) lets
// calls that nothing bounds return, so that a failing test leaks nothing.
type hungRecords struct {
	store.Store
	hang     atomic.Bool
	renewing chan struct{} // told of each renewal that hangs
	unblock  chan struct{}
}

func newHungRecords(t *testing.T, st store.Store) *hungRecords {
	h := &hungRecords{Store: st, renewing: make(chan struct{}, 1), unblock: make(chan struct{})}
	t.Cleanup(func() { close(h.unblock) }) // before the store closes (cleanups run last first)
	return h
}

func (h *hungRecords) block(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-h.unblock:
		return errors.New("test over: the hung call was let go")
	}
}

func (h *hungRecords) RecordRenew(ctx context.Context, p *store.RecordRenewParams) error {
	if h.hang.Load() {
		select {
		case h.renewing <- struct{}{}:
		default:
		}
		return h.block(ctx)
	}
	return h.Store.RecordRenew(ctx, p)
}

func (h *hungRecords) RecordComplete(ctx context.Context, p *store.RecordCompleteParams) error {
	if h.hang.Load() {
		return h.block(ctx)
	}
	return h.Store.RecordComplete(ctx, p)
}

func (h *hungRecords) RecordRelease(ctx context.Context, p *store.RecordReleaseParams) error {
	if h.hang.Load() {
		return h.block(ctx)
	}
	return h.Store.RecordRelease(ctx, p)
}

// bothRawStores runs fn on a fresh SQLite store and on a fresh PostgreSQL
// schema, as parallel subtests "sqlite" and "postgres".
func bothRawStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, testStore(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url, schema := dbtest.NewSchema(t)
		st := parentPG(t, url, schema)
		fn(t, st)
	})
}

// TestDoReturnsWhenTheStoreHangs (both stores): when the store stops
// answering while fn runs (its lease's renewal hangs), a Do whose fn fails,
// panics, calls runtime.Goexit, or succeeds (its result then cannot be
// stored) still ends: the key's completion and release are bounded (a third
// of the lease, as the executor bounds a job key's give-back), the failed
// release is logged, and the key is taken again once its lease has ended.
// The caller gets fn's error, the panic's, or its goroutine ended. Do used
// to wait for the store for ever: the release (and the completion) had the
// caller's context without its cancellation and no deadline, and after a
// Goexit the renewer, hung in its renewal under a context nobody cancelled,
// was waited for before the release.
func TestDoReturnsWhenTheStoreHangs(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"error", "panic", "goexit", "result"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			bothRawStores(t, func(t *testing.T, raw store.Store) {
				testDoHungStore(t, raw, how)
			})
		})
	}
}

func testDoHungStore(t *testing.T, raw store.Store, how string) {
	ctx := t.Context()
	st := newHungRecords(t, raw)
	var logs lockedBuffer
	// The bound of the completion and the release: a third of LeaseDuration.
	client, err := idem.NewClient(st, &idem.Config{LeaseDuration: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 300 * time.Millisecond
	fnErr := errors.New("fn failed")
	done := make(chan error, 1)
	returned := false
	go func() {
		var err error
		defer func() { done <- err }()
		_, err = client.Do(ctx, "k", func(context.Context) (any, error) {
			st.hang.Store(true)
			<-st.renewing // the store no longer answers
			switch how {
			case "error":
				return nil, fnErr
			case "panic":
				panic("boom")
			case "goexit":
				runtime.Goexit()
			}
			return "kept?", nil
		}, &idem.DoOpts{Lease: lease})
		returned = true
	}()
	select {
	case err = <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("Do (fn: %s) still waiting for a store that does not answer after %v", how, waitTimeout)
	}
	switch how {
	case "error":
		if !errors.Is(err, fnErr) {
			t.Errorf("Do: %v, want fn's error", err)
		}
	case "panic":
		if err == nil || !strings.Contains(err.Error(), "panic in Do: boom") {
			t.Errorf("Do: %v, want the panic's error", err)
		}
	case "goexit":
		if returned {
			t.Error("Do returned after fn called runtime.Goexit, want the caller's goroutine ended")
		}
	case "result":
		if err == nil {
			t.Error("Do succeeded although its result could not be stored")
		} else if !errors.Is(err, idem.ErrResultNotStored) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Do: %v, want ErrResultNotStored wrapping the store call's deadline", err)
		}
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "key=k") {
		t.Errorf("the failed release is not logged: %q", out)
	}
	// The store answers again: the key, not given back, is taken once its
	// lease has ended, and fn runs (nothing was cached).
	st.hang.Store(false)
	r, err := client.Do(ctx, "k", func(context.Context) (any, error) { return "second", nil },
		&idem.DoOpts{Lease: lease, Wait: waitTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if r.WasCached || string(r.Result) != `"second"` {
		t.Fatalf("next Do = %s (cached %v), want fn run again", r.Result, r.WasCached)
	}
}

// TestDoCancelsFnWhenItsRenewalHangs (both stores): when a renewal of Do's
// lease hangs (the store stops answering while fn runs), fn's context is
// cancelled with ErrLeaseLost once the lease has ended, as when the
// renewals fail: another Do may take the lapsed key over and run fn beside
// it. Each renewal is bounded (by the lease, at least a second); a hung
// one used to wait for ever, so fn ran on unwarned.
func TestDoCancelsFnWhenItsRenewalHangs(t *testing.T) {
	t.Parallel()
	bothRawStores(t, func(t *testing.T, raw store.Store) {
		ctx := t.Context()
		st := newHungRecords(t, raw)
		client, err := idem.NewClient(st, &idem.Config{LeaseDuration: time.Second, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		const lease = 300 * time.Millisecond
		var cause error
		_, err = client.Do(ctx, "k", func(ctx context.Context) (any, error) {
			st.hang.Store(true)
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return nil, ctx.Err()
			case <-time.After(waitTimeout):
				return "ran on", nil
			}
		}, &idem.DoOpts{Lease: lease})
		if !errors.Is(cause, idem.ErrLeaseLost) {
			t.Fatalf("fn's context: cause %v, want ErrLeaseLost once the %v lease lapsed", cause, lease)
		}
		if !errors.Is(err, idem.ErrLeaseLost) {
			t.Fatalf("Do: %v, want ErrLeaseLost", err)
		}
		st.hang.Store(false)
		r, err := client.Do(ctx, "k", func(context.Context) (any, error) { return 1, nil }, &idem.DoOpts{Wait: waitTimeout})
		if err != nil || r.WasCached {
			t.Fatalf("next Do: %+v, %v; want fn run", r, err)
		}
	})
}
