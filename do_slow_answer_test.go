package idem_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// slowAnswerRecords is a real store whose record completions and releases,
// once slow is set, are carried out and committed, but whose answer is
// held until the caller's context ends: a store that commits and then
// answers too late (a slow network, a loaded database). unblock (closed at
// cleanup) lets go calls that nothing bounds.
type slowAnswerRecords struct {
	store.Store
	slow      atomic.Bool
	committed atomic.Int32 // writes committed whose answer was held
	unblock   chan struct{}
}

func newSlowAnswerRecords(t *testing.T, st store.Store) *slowAnswerRecords {
	s := &slowAnswerRecords{Store: st, unblock: make(chan struct{})}
	t.Cleanup(func() { close(s.unblock) })
	return s
}

// late holds the answer of a committed write until ctx ends.
func (s *slowAnswerRecords) late(ctx context.Context) error {
	s.committed.Add(1)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-s.unblock:
		return errors.New("test over: the late answer was let go")
	}
}

func (s *slowAnswerRecords) RecordComplete(ctx context.Context, p *store.RecordCompleteParams) error {
	if !s.slow.Load() {
		return s.Store.RecordComplete(ctx, p)
	}
	if err := s.Store.RecordComplete(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	return s.late(ctx)
}

func (s *slowAnswerRecords) RecordRelease(ctx context.Context, p *store.RecordReleaseParams) error {
	if !s.slow.Load() {
		return s.Store.RecordRelease(ctx, p)
	}
	if err := s.Store.RecordRelease(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	return s.late(ctx)
}

// TestDoTrustsAStoreThatCommitsButAnswersLate (both stores): when the
// store commits Do's result (or the give-back of a failed Do's key, or a
// result lease's completion) but its answer comes after the bound of the
// call (a third of Config.LeaseDuration), Do reads the record back: the
// result stored by this run is returned as Do's success (a later Do of the
// key is served it), and a key given back is no failure to report nor warn
// of. Do used to return the store call's deadline error although the result
// was stored, and to add the release's deadline to fn's error with a
// warning that the key stayed held, which it did not.
func TestDoTrustsAStoreThatCommitsButAnswersLate(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"result", "error", "resultlease"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			bothRawStores(t, func(t *testing.T, raw store.Store) {
				testDoSlowAnswer(t, raw, how)
			})
		})
	}
}

func testDoSlowAnswer(t *testing.T, raw store.Store, how string) {
	ctx := t.Context()
	st := newSlowAnswerRecords(t, raw)
	var logs lockedBuffer
	// The bound of the completion and the release: a third of LeaseDuration.
	client, err := idem.NewClient(st, &idem.Config{LeaseDuration: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	switch how {
	case "result":
		r, err := client.Do(ctx, "k", func(context.Context) (any, error) {
			runs++
			st.slow.Store(true)
			return "kept", nil
		}, nil)
		if err != nil {
			t.Fatalf("Do: %v; want its result, which the store committed (%d late answers)", err, st.committed.Load())
		}
		if r.WasCached || string(r.Result) != `"kept"` || r.StoredAt == nil {
			t.Fatalf("Do = %+v, want the stored \"kept\"", r)
		}
	case "error":
		fnErr := errors.New("fn failed")
		_, err := client.Do(ctx, "k", func(context.Context) (any, error) {
			runs++
			st.slow.Store(true)
			return nil, fnErr
		}, nil)
		if !errors.Is(err, fnErr) {
			t.Fatalf("Do: %v, want fn's error", err)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, idem.ErrResultNotStored) {
			t.Errorf("Do: %v; want fn's error alone: the key was given back", err)
		}
		if out := logs.String(); strings.Contains(out, "level=WARN") {
			t.Errorf("a give-back that the store committed is warned of: %q", out)
		}
	case "resultlease":
		l, err := client.ResultLeaseAcquire(ctx, "k", nil)
		if err != nil || l.Token == "" {
			t.Fatalf("acquire: %+v, %v", l, err)
		}
		runs++
		st.slow.Store(true)
		r, err := client.ResultLeaseComplete(ctx, "", "k", l.Token, []byte(`"kept"`), 0, 0)
		if err != nil {
			t.Fatalf("complete: %v; want the result, which the store committed (%d late answers)", err, st.committed.Load())
		}
		if string(r.Result) != `"kept"` {
			t.Fatalf("complete = %s, want \"kept\"", r.Result)
		}
	}
	if st.committed.Load() == 0 {
		t.Fatal("no write answered late: the test did not test")
	}
	st.slow.Store(false)
	// The next Do of the key is served the stored result, or (the key
	// given back) runs fn at once.
	r, err := client.Do(ctx, "k", func(context.Context) (any, error) { runs++; return "second", nil }, nil)
	if err != nil {
		t.Fatalf("next Do: %v", err)
	}
	want, cached := `"kept"`, true
	if how == "error" {
		want, cached = `"second"`, false
	}
	if string(r.Result) != want || r.WasCached != cached {
		t.Fatalf("next Do = %s (cached %v), want %s (cached %v)", r.Result, r.WasCached, want, cached)
	}
}
