package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// lateReleaseRecords is a real store whose key releases, once late is set,
// are carried out and committed, but whose answer is held until the
// caller's context ends: a store that commits and answers too late.
type lateReleaseRecords struct {
	store.Store
	late      atomic.Bool
	committed atomic.Int32
	unblock   chan struct{}
}

func (s *lateReleaseRecords) RecordRelease(ctx context.Context, p *store.RecordReleaseParams) error {
	if !s.late.Load() {
		return s.Store.RecordRelease(ctx, p)
	}
	if err := s.Store.RecordRelease(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	s.committed.Add(1)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-s.unblock:
		return errors.New("test over: the late answer was let go")
	}
}

// capturedLogs is a slog.Handler that keeps the records it is given.
type capturedLogs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *capturedLogs) Enabled(context.Context, slog.Level) bool { return true }
func (c *capturedLogs) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *capturedLogs) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capturedLogs) WithGroup(string) slog.Handler      { return c }

// atLeast returns the messages logged at level or above.
func (c *capturedLogs) atLeast(level slog.Level) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.records {
		if r.Level >= level {
			out = append(out, r.Message)
		}
	}
	return out
}

// TestCancelledKeyGiveBackAnsweredLate (both stores): when the give-back
// of a cancelled job's key lease commits but the store's answer comes
// after its bound (a third of the lease), the executor reads the record
// back: the key no longer held by the job was given back, and no warning
// says that it waits for its lease to end. The give-back's deadline error
// used to be warned of although the key was free.
func TestCancelledKeyGiveBackAnsweredLate(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var raw store.Store
			var err error
			if name == "sqlite" {
				raw, err = sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
			} else {
				url, schema := dbtest.NewSchema(t)
				raw, err = pgstore.Open(context.Background(), url, &pgstore.Config{Schema: schema})
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { raw.Close() })
			testCancelledKeyGiveBackLate(t, raw)
		})
	}
}

func testCancelledKeyGiveBackLate(t *testing.T, raw store.Store) {
	ctx := context.Background()
	st := &lateReleaseRecords{Store: raw, unblock: make(chan struct{})}
	t.Cleanup(func() { close(st.unblock) })
	logs := &capturedLogs{}
	handlers := map[string]executor.Handler{}
	exec, err := executor.New(&executor.Config{
		Store: st, Now: func() time.Time { return time.Now().UTC() }, LeaseDuration: 600 * time.Millisecond,
		Logger:     slog.New(logs),
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(*idemtype.JobRow) time.Duration { return time.Second },
		Handler:    func(kind string) executor.Handler { return handlers[kind] },
	})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	res, err := st.JobInsertMany(ctx, &store.JobInsertManyParams{Now: at, Jobs: []*store.JobInsertParams{{
		Tenant: "t", Queue: "q", Kind: "k", Args: []byte("{}"), MaxAttempts: 3, RunAt: at, ResultTTL: time.Hour,
		IdempotencyKey: "key-late", Fingerprint: "fp"}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("insert: %v %+v", err, res)
	}
	jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1,
		LeaseUntil: at.Add(time.Minute), Now: at})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	run := jobs[0]
	// The key step takes the key after the cancel committed (the claim's
	// acquire racing it): the lease, under the job's owner, is the
	// attempt's to give back.
	run.KeyHeld = false
	if _, err := st.JobCancel(ctx, &store.JobCancelParams{ID: run.ID, Reason: "test", Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	handlers["k"] = func(hctx context.Context, _ *idemtype.JobRow) (json.RawMessage, error) {
		st.late.Store(true) // the give-back commits, and its answer comes late
		cancel(idemtype.ErrJobCancelled)
		return nil, context.Cause(hctx)
	}
	exec.Execute(cctx, run, nil)
	if st.committed.Load() == 0 {
		t.Fatal("no give-back answered late: the test did not test")
	}
	if warned := logs.atLeast(slog.LevelWarn); len(warned) > 0 {
		t.Errorf("a give-back the store committed is warned of: %q", warned)
	}
	st.late.Store(false)
	now := time.Now().UTC()
	acq, err := st.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "key-late", Owner: "job:next",
		LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !acq.Acquired {
		t.Fatalf("the key was not given back: %+v", acq)
	}
}
