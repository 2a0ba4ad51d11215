package idem_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// doClient is a client on a SQLite store of its own whose Do leases last
// an hour: a key not given back stays held for the whole test.
func doClient(t *testing.T) *idem.Client {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), LeaseDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// TestDoGoexitGivesTheKeyBack: a Do whose fn calls runtime.Goexit
// (t.FailNow) ends the caller's goroutine, as it would without Do, and
// gives the key back: the next Do of the key runs fn at once. The key
// stayed held until its lease ended, every Do of it meanwhile failing with
// ErrKeyInProgress.
func TestDoGoexitGivesTheKeyBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client := doClient(t)
	ended := make(chan struct{})
	returned := false
	go func() {
		defer close(ended)
		_, _ = client.Do(ctx, "k", func(context.Context) (any, error) { runtime.Goexit(); return nil, nil }, nil)
		returned = true
	}()
	<-ended
	if returned {
		t.Fatal("Do returned after fn called runtime.Goexit, want the caller's goroutine ended")
	}
	r, err := client.Do(ctx, "k", func(context.Context) (any, error) { return "second", nil }, nil)
	if errors.Is(err, idem.ErrKeyInProgress) {
		t.Fatal("the key stays held by the Do whose fn called runtime.Goexit: ErrKeyInProgress")
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.WasCached || string(r.Result) != `"second"` {
		t.Fatalf("second Do = %s (cached %v), want fn run again", r.Result, r.WasCached)
	}
}

// TestDoPanicNilIsNotCached: under GODEBUG=panicnil=1 (recover reports a
// panic(nil) as nil, and stops it) a Do whose fn panics with nil fails
// ("panic in Do") and caches nothing. It was taken for a return: null was
// cached as the key's result, and fn never ran again.
func TestDoPanicNilIsNotCached(t *testing.T) {
	ctx := t.Context()
	client := doClient(t)
	t.Setenv("GODEBUG", "panicnil=1")
	if r, err := client.Do(ctx, "k", func(context.Context) (any, error) { panic(nil) }, nil); err == nil {
		t.Fatalf("Do whose fn panicked with nil = %s, want an error", r.Result)
	}
	r, err := client.Do(ctx, "k", func(context.Context) (any, error) { return "second", nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.WasCached || string(r.Result) != `"second"` {
		t.Fatalf("second Do = %s (cached %v), want fn run again", r.Result, r.WasCached)
	}
}
