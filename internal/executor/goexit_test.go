package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/store"
)

// TestHandlerEndsAreTyped: how a handler ended decides the finish, not the
// error's text. A handler calling runtime.Goexit fails its attempt (retried)
// with an error naming Goexit, and Execute returns (Goexit ended the
// executor's own goroutine, so Execute never returned and no finish was
// made); a recovered panic, also after the job's timeout, is Panicked; an
// error the handler returns that reads "panic: …" is not.
func TestHandlerEndsAreTyped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	handlers := map[string]executor.Handler{
		"exits": func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
			runtime.Goexit()
			return nil, nil
		},
		"panics": func(context.Context, *idemtype.JobRow) (json.RawMessage, error) { panic("boom") },
		"late": func(ctx context.Context, _ *idemtype.JobRow) (json.RawMessage, error) {
			<-ctx.Done()
			panic("late boom")
		},
		"looks": func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
			return nil, errors.New("panic: only the text")
		},
	}
	exec, err := executor.New(&executor.Config{
		Store: b.store, Now: func() time.Time { return now }, LeaseDuration: time.Minute,
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(*idemtype.JobRow) time.Duration { return time.Second },
		Timeout: func(row *idemtype.JobRow) time.Duration {
			if row.Kind == "late" {
				return time.Millisecond
			}
			return 0
		},
		Handler: func(kind string) executor.Handler { return handlers[kind] },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind, prefix string
		panicked     bool
	}{
		{"exits", "handler called runtime.Goexit instead of returning\n", false},
		{"panics", "panic: boom\n", true},
		{"late", "panic: late boom (job timed out after 1ms)\n", true},
		{"looks", "panic: only the text", false},
	} {
		row := b.claim(t, c.kind, "")
		done := make(chan struct{})
		var fin *store.JobFinishParams
		go func() { // Goexit ended the goroutine calling Execute
			defer close(done)
			fin = exec.Execute(context.Background(), row, nil)
		}()
		<-done
		if fin == nil {
			t.Errorf("%s: Execute did not return", c.kind)
			continue
		}
		if fin.State != idemtype.StateRetryable || !strings.HasPrefix(fin.Error, c.prefix) || fin.Panicked != c.panicked {
			first, _, _ := strings.Cut(fin.Error, "\n")
			t.Errorf("%s: %s, Panicked %v, error %q…; want retryable, Panicked %v, error starting %q",
				c.kind, fin.State, fin.Panicked, first, c.panicked, c.prefix)
		}
	}
}

// TestPanicNilIsAPanic: a handler's panic(nil) is a panic, Panicked, also
// under GODEBUG=panicnil=1, where recover returns nil (as for Goexit): it
// was reported as a call of runtime.Goexit, not Panicked.
func TestPanicNilIsAPanic(t *testing.T) {
	b := setup(t)
	exec, err := executor.New(&executor.Config{
		Store: b.store, Now: func() time.Time { return now }, LeaseDuration: time.Minute,
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(*idemtype.JobRow) time.Duration { return time.Second },
		Handler: func(string) executor.Handler {
			return func(context.Context, *idemtype.JobRow) (json.RawMessage, error) { panic(nil) }
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ godebug, prefix string }{
		{"", "panic: panic called with nil argument"}, // *runtime.PanicNilError
		{"panicnil=1", "panic: <nil>\n"},
	} {
		t.Setenv("GODEBUG", c.godebug)
		fin := exec.Execute(context.Background(), b.claim(t, "nil-panic", ""), nil)
		if fin.State != idemtype.StateRetryable || !fin.Panicked || !strings.HasPrefix(fin.Error, c.prefix) {
			first, _, _ := strings.Cut(fin.Error, "\n")
			t.Errorf("GODEBUG=%q: %s, Panicked %v, error %q…; want retryable, Panicked, error starting %q",
				c.godebug, fin.State, fin.Panicked, first, c.prefix)
		}
	}
}
