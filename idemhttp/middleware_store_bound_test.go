package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
)

// mwStoreWait is how long a test waits for the middleware to end a request
// whose store does not answer: far beyond the bound (a third of the 1s
// lease), short of the test's timeout.
const mwStoreWait = 30 * time.Second

// Modes of stallingRecords.
const (
	storeAnswers int32 = iota
	// storeHangs: record writes (renewal, completion, release) block until
	// their context ends, as on a PostgreSQL connection that never answers
	// or behind a SQLite writer that is stuck.
	storeHangs
	// storeAnswersLate: completions and releases are carried out and
	// committed, and their answer is held until their context ends.
	storeAnswersLate
)

// stallingRecords is a real store whose record writes hang or answer late
// (mode). unblock (closed at cleanup, by the caller, before the server
// closes) lets go the calls nothing bounds, so that a failing test ends
// and leaks nothing.
type stallingRecords struct {
	store.Store
	mode      atomic.Int32
	committed atomic.Int32 // writes committed whose answer was held
	unblock   chan struct{}
}

func newStallingRecords(st store.Store) *stallingRecords {
	return &stallingRecords{Store: st, unblock: make(chan struct{})}
}

func (s *stallingRecords) block(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-s.unblock:
		return errors.New("test over: the stalled call was let go")
	}
}

// write runs a record write as the mode says.
func (s *stallingRecords) write(ctx context.Context, do func(ctx context.Context) error) error {
	switch s.mode.Load() {
	case storeHangs:
		return s.block(ctx)
	case storeAnswersLate:
		if err := do(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		s.committed.Add(1)
		return s.block(ctx)
	}
	return do(ctx)
}

func (s *stallingRecords) RecordComplete(ctx context.Context, p *store.RecordCompleteParams) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.RecordComplete(ctx, p) })
}

func (s *stallingRecords) RecordRelease(ctx context.Context, p *store.RecordReleaseParams) error {
	return s.write(ctx, func(ctx context.Context) error { return s.Store.RecordRelease(ctx, p) })
}

func (s *stallingRecords) RecordRenew(ctx context.Context, p *store.RecordRenewParams) error {
	if s.mode.Load() == storeHangs {
		return s.block(ctx)
	}
	return s.Store.RecordRenew(ctx, p)
}

// TestMiddlewareBoundsItsStoreCalls (both stores, a real server on
// 127.0.0.1): once the handler has answered, the middleware's storing of
// the answer and its release of the key after a refused answer (a 500)
// are each bounded by a third of the lease. When the store does not
// answer, the request's goroutine ends all the same (the failure logged,
// the key taken again once its lease has ended); when the store commits
// but answers late, the middleware reads the record back: the answer
// stored is replayed and the key given back runs again, with no error
// logged. Both used to wait for the store for ever: neither call had a
// deadline, under a context without the request's cancellation.
func TestMiddlewareBoundsItsStoreCalls(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		mode   int32
		status int
	}{
		{"hung/stored", storeHangs, http.StatusCreated},
		{"hung/released", storeHangs, http.StatusInternalServerError},
		{"late/stored", storeAnswersLate, http.StatusCreated},
		{"late/released", storeAnswersLate, http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bothStores(t, func(t *testing.T, open opener) {
				testMiddlewareStoreBound(t, open, c.mode, c.status)
			})
		})
	}
}

func testMiddlewareStoreBound(t *testing.T, open opener, mode int32, status int) {
	st := newStallingRecords(open(t))
	var logs syncBuffer
	cfg := &idemhttp.MiddlewareConfig{Lease: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	var calls atomic.Int32
	mw := idemhttp.Middleware(st, cfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n == 1 {
			st.mode.Store(mode) // the store stalls once the handler has run
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "answer "+string(rune('0'+n)))
	}))
	served := make(chan struct{}, 1) // told when the middleware's goroutine ends the first request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			select {
			case served <- struct{}{}:
			default: // a repeat's end, not waited for
			}
		}()
		mw.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(st.unblock) }) // before the server closes (cleanups run last first)

	answered := make(chan error, 1)
	go func() {
		r, err := http.NewRequest(http.MethodPost, srv.URL+"/pay", strings.NewReader("amount=1"))
		if err == nil {
			r.Header.Set("Idempotency-Key", "k")
			var res *http.Response
			if res, err = http.DefaultClient.Do(r); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
		answered <- err
	}()
	select {
	case <-served:
	case <-time.After(mwStoreWait):
		t.Fatalf("the middleware still waits for a store that does not answer after %v (%s)", mwStoreWait, logs.String())
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	switch mode {
	case storeHangs:
		if !strings.Contains(out, "level=ERROR") {
			t.Errorf("the store's failure is not logged: %q", out)
		}
	case storeAnswersLate:
		if st.committed.Load() == 0 {
			t.Fatal("no write answered late: the test did not test")
		}
		if strings.Contains(out, "level=ERROR") {
			t.Errorf("a write the store committed is logged as failed: %q", out)
		}
	}

	// The store answers again. An answer stored is replayed; a key given
	// back runs the handler again at once; a key the middleware could not
	// give back (the store hung) runs it again once its lease has ended.
	st.mode.Store(storeAnswers)
	deadline := time.Now().Add(mwStoreWait)
	var again *resp
	for {
		again = post(t, srv.URL+"/pay", "k", "amount=1")
		if again.status != http.StatusConflict || mode != storeHangs || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll: the lease ends within a second
	}
	replayed := again.header.Get("Idempotent-Replayed") == "true"
	switch {
	case mode == storeAnswersLate && status < 500:
		if again.status != status || !replayed || string(again.body) != "answer 1" || calls.Load() != 1 {
			t.Fatalf("repeat: %d %q (replayed %v, calls %d), want the stored answer replayed",
				again.status, again.body, replayed, calls.Load())
		}
	default:
		if again.status != status || replayed || string(again.body) != "answer 2" || calls.Load() != 2 {
			t.Fatalf("repeat: %d %q (replayed %v, calls %d), want the handler run again",
				again.status, again.body, replayed, calls.Load())
		}
	}
}
