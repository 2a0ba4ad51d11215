package recipes_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// clock is the injected clock of a recipe: retry delays pass without real
// time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 2, 6, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// open returns a client on a fresh SQLite file with cfg (its clock set) and
// a function that closes everything.
func open(cfg *idem.Config) (*idem.Client, func()) {
	cfg.DisableMaintenance = true
	return openWith(cfg)
}

// openWith is open keeping cfg's maintenance setting (the scheduler runs
// with the leader's maintenance).
func openWith(cfg *idem.Config) (*idem.Client, func()) {
	dir, err := os.MkdirTemp("", "idem-recipe-")
	if err != nil {
		panic(err)
	}
	st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := idem.NewClient(st, cfg)
	if err != nil {
		panic(err)
	}
	return client, func() {
		st.Close()
		os.RemoveAll(dir)
	}
}

// work claims one job of queue as a pull worker.
func work(ctx context.Context, c *idem.Client, queue string) *idem.JobRow {
	jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{queue}, WorkerID: "recipe", Lease: time.Minute})
	if err != nil {
		panic(err)
	}
	if len(jobs) == 0 {
		return nil
	}
	return jobs[0]
}
