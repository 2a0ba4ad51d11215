package idem_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	if os.Getenv(mpChildEnv) != "" {
		os.Exit(mpChild())
	}
	goleak.VerifyTestMain(m)
}

// quietLogger keeps test output readable; set IDEM_TEST_LOG=1 to see logs.
func quietLogger() *slog.Logger {
	if os.Getenv("IDEM_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testStore opens a fresh SQLite store in the test's temp dir.
func testStore(t testing.TB) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// bundle is what most tests need.
type bundle struct {
	client  *idem.Client
	workers *idem.Workers
	store   *sqlitestore.Store
}

// setup returns a client on a fresh store; cfg may be nil. When cfg has
// queues, the client is started and stopped at cleanup.
func setup(t *testing.T, cfg *idem.Config) *bundle {
	t.Helper()
	st := testStore(t)
	var c idem.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Workers == nil {
		c.Workers = idem.NewWorkers()
	}
	if c.Logger == nil {
		c.Logger = quietLogger()
	}
	client, err := idem.NewClient(st, &c)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return &bundle{client: client, workers: c.Workers, store: st}
}

// start starts the client and stops it at cleanup (before the store closes).
func (b *bundle) start(t *testing.T) {
	t.Helper()
	if err := b.client.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.client.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond) // polls are reads that compete with the work
	}
}

// waitState waits until job id is in state.
func waitState(t *testing.T, b *bundle, id int64, state idem.JobState) *idem.JobRow {
	t.Helper()
	var row *idem.JobRow
	waitFor(t, "job in state "+string(state), 20*time.Second, func() bool {
		r, err := b.client.JobGet(context.Background(), "", id)
		if err != nil {
			t.Fatalf("get job %d: %v", id, err)
		}
		row = r
		return r.State == state
	})
	return row
}

// queues is a one-queue config with n workers.
func queues(n int) map[string]idem.QueueConfig {
	return map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: n}}
}

// fakeClock is a settable clock for backoff and snooze tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// SendArgs is the args type of the typed-worker tests.
type SendArgs struct {
	To string `json:"to"`
	N  int    `json:"n"`
}

func (SendArgs) Kind() string { return "send" }
