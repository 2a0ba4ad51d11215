package idem_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store/sqlitestore"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	if os.Getenv(mpChildEnv) != "" {
		os.Exit(mpChild())
	}
	if os.Getenv(pauseChildEnv) != "" {
		os.Exit(pauseChild())
	}
	if os.Getenv(schedChildEnv) != "" {
		os.Exit(schedChild())
	}
	if os.Getenv(rateChildEnv) != "" {
		os.Exit(rateChild())
	}
	if os.Getenv(sqlMPChildEnv) != "" {
		os.Exit(sqlMPChild())
	}
	if os.Getenv(flowChildEnv) != "" {
		os.Exit(flowChild())
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
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
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

// waitTimeout bounds every wait of a test on a job.
const waitTimeout = 60 * time.Second

// waitState waits until job id is in state: a finished state through
// JobWait, any other through the client's finish notifications (each written
// finish of the job wakes the wait, which then re-reads the job).
func waitState(t *testing.T, b *bundle, id int64, state idem.JobState) *idem.JobRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if state.Finished() {
		row, err := b.client.JobWait(ctx, id)
		if err != nil {
			t.Fatalf("wait for job %d: %v", id, err)
		}
		if row.State != state {
			t.Fatalf("job %d finished %s, want %s", id, row.State, state)
		}
		return row
	}
	for {
		written, stop := idem.WaitFinishWritten(b.client, id)
		row, err := b.client.JobGet(ctx, "", id)
		if err != nil {
			stop()
			t.Fatalf("get job %d: %v", id, err)
		}
		if row.State == state {
			stop()
			return row
		}
		select {
		case <-written:
		case <-ctx.Done():
			t.Fatalf("job %d: still %s after %s, want %s", id, row.State, waitTimeout, state)
		}
		stop()
	}
}

// waitAll waits until every job is finished and returns them.
func waitAll(t *testing.T, c *idem.Client, ids []int64, timeout time.Duration) []*idem.JobRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rows := make([]*idem.JobRow, len(ids))
	for i, id := range ids {
		row, err := c.JobWait(ctx, id)
		if err != nil {
			t.Fatalf("wait for job %d: %v", id, err)
		}
		rows[i] = row
	}
	return rows
}

// ids returns the job ids of enqueue results.
func ids(res []idem.EnqueueResult) []int64 {
	out := make([]int64, len(res))
	for i, r := range res {
		out[i] = r.Job.ID
	}
	return out
}

// enqueueChunks enqueues items in batches of at most idem.MaxBatch and
// returns the new jobs' ids in item order.
func enqueueChunks(t *testing.T, c *idem.Client, items []idem.EnqueueParams) []int64 {
	t.Helper()
	var all []int64
	for chunk := range slices.Chunk(items, idem.MaxBatch) {
		res, err := c.EnqueueMany(context.Background(), chunk)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids(res)...)
	}
	return all
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
