package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// leaseStoreKinds are the stores the lease tests run on.
var leaseStoreKinds = []string{"sqlite", "postgres"}

// openLeaseStore opens a fresh store of the given kind and returns it with a
// function that opens a second handle on the same database (another
// "process" as far as the runtime is concerned: its own connections, no
// shared in-memory state with the first client).
func openLeaseStore(t *testing.T, kind string) (store.Store, func() store.Store) {
	t.Helper()
	ctx := context.Background()
	switch kind {
	case "sqlite":
		path := sqlitetest.Path(t)
		open := func() store.Store {
			st, err := sqlitestore.Open(ctx, path, nil)
			if err != nil {
				t.Fatalf("open sqlite: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		return open(), open
	default:
		url, schema := dbtest.NewSchema(t)
		open := func(skipMigrate bool) store.Store {
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				t.Fatalf("pool: %v", err)
			}
			t.Cleanup(pool.Close)
			// CallerClock: these tests drive time with a fake idem.Config.Now.
			st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, SkipMigrate: skipMigrate, CallerClock: true})
			if err != nil {
				t.Fatalf("open pg: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		return open(false), func() store.Store { return open(true) }
	}
}

// Short leases with a fast rescuer: a handler that outlives its lease by a
// wide margin would be rescued (and re-run) unless the heartbeat renews it.
const (
	shortLease   = time.Second // the smallest lease Config accepts
	fastRescue   = 50 * time.Millisecond
	longHandler  = 3*shortLease + shortLease/2 // > 3× the lease: three lapses without renewals
	leaseTimeout = 30 * time.Second
)

// startLeaseClient starts a client with short leases and a fast rescuer on
// st, working the default queue with workers.
func startLeaseClient(t *testing.T, st store.Store, workers *idem.Workers, id string) *idem.Client {
	t.Helper()
	return startLeaseClientWith(t, st, workers, id, shortLease)
}

// startLeaseClientWith is startLeaseClient with a lease of its own.
func startLeaseClientWith(t *testing.T, st store.Store, workers *idem.Workers, id string, lease time.Duration) *idem.Client {
	t.Helper()
	c := startClient(t, st, &idem.Config{Workers: workers, Queues: queues(2), WorkerID: id,
		Logger: quietLogger(), LeaseDuration: lease, RescueInterval: fastRescue, LeaderTTL: time.Second,
		PollInterval: 20 * time.Millisecond})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return c
}

// TestLongHandlerKeepsItsLease: a handler running 3.5× its lease while the
// leader's rescuer runs every 50 ms completes once, as attempt 1, with one
// attempt recorded. Without lease renewals the rescuer returns the job to
// retryable mid-run and it runs again as attempt 2.
func TestLongHandlerKeepsItsLease(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			var starts atomic.Int32
			workers := idem.NewWorkers()
			workers.Handle("long", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
				starts.Add(1)
				select {
				case <-time.After(longHandler): // simulates long work
					return json.RawMessage(`"done"`), nil
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			})
			c := startLeaseClient(t, st, workers, "long-worker")
			res, err := c.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "long"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
			defer cancel()
			row, err := c.JobWait(ctx, res.Job.ID)
			if err != nil {
				t.Fatalf("wait: %v", err)
			}
			attempts, err := c.JobAttempts(ctx, "", row.ID)
			if err != nil {
				t.Fatal(err)
			}
			if row.State != idem.StateCompleted || row.Attempt != 1 || len(attempts) != 1 || starts.Load() != 1 {
				t.Fatalf("state %s attempt %d, %d attempts recorded, %d handler starts; want completed in attempt 1, started once",
					row.State, row.Attempt, len(attempts), starts.Load())
			}
			if attempts[0].Outcome != "completed" {
				t.Fatalf("attempt outcome %q, want completed (%s)", attempts[0].Outcome, attempts[0].Error)
			}
		})
	}
}

// TestCancelReachesRunningHandlerThroughHeartbeat: a job running in one
// client is cancelled by another client on its own store handle (as another
// process would); on SQLite the running handler learns it only from its
// next lease renewal, so its context ends within a few heartbeats (cause
// ErrLeaseLost); on PostgreSQL the store announces the cancel and the
// handler is cancelled by it (TestCancelFromAnotherClientStopsHandlerAtOnce).
// Either way it ran once.
func TestCancelReachesRunningHandlerThroughHeartbeat(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, second := openLeaseStore(t, kind)
			started := make(chan int64, 1)
			stopped := make(chan error, 1)
			var starts atomic.Int32
			workers := idem.NewWorkers()
			workers.Handle("wait-cancel", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
				starts.Add(1)
				started <- j.ID
				select {
				case <-ctx.Done():
					stopped <- context.Cause(ctx)
					return nil, ctx.Err()
				case <-time.After(leaseTimeout):
					stopped <- errors.New("handler was never cancelled")
					return nil, errors.New("not cancelled")
				}
			})
			lease := shortLease
			if kind == "postgres" {
				// The cancel must come by the store's NOTIFY: with a heartbeat
				// every third of a 1 s lease, a heartbeat found the lease lost
				// first in 2 of 20 runs on a loaded machine.
				lease = 10 * shortLease
			}
			worker := startLeaseClientWith(t, st, workers, "cancel-worker", lease)
			// The other client is never started: it has no running registry,
			// so its cancel reaches the handler only through the store.
			other, err := idem.NewClient(second(), &idem.Config{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := worker.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "wait-cancel"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
			defer cancel()
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("handler never started")
			}
			if kind == "postgres" {
				waitListening(t, st.(*pgstore.Store).Schema(), 1)
			}
			cancelledAt := time.Now()
			if _, err := other.JobCancel(ctx, "", res.Job.ID); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			var cause error
			select {
			case cause = <-stopped:
			case <-ctx.Done():
				t.Fatal("handler still running")
			}
			if kind == "sqlite" && !errors.Is(cause, idem.ErrLeaseLost) {
				t.Fatalf("handler context ended with %v, want the lease-lost cause", cause)
			}
			if kind == "postgres" && !errors.Is(cause, idem.ErrJobCancelled) {
				t.Fatalf("handler context ended with %v, want the cancel's cause (announced by the store)", cause)
			}
			// A heartbeat runs every third of the lease; allow many on a busy machine.
			if took := time.Since(cancelledAt); took > 10*shortLease {
				t.Errorf("cancel reached the handler after %s, want within a few heartbeats (%s)", took, shortLease/3)
			}
			row, err := other.JobGet(ctx, "", res.Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if row.State != idem.StateCancelled || starts.Load() != 1 {
				t.Fatalf("state %s after %d starts, want cancelled after 1", row.State, starts.Load())
			}
		})
	}
}

// TestSlowKeyAcquireKeepsItsLease (PostgreSQL): a keyed job whose key lease
// takes longer than 3 job leases to acquire (the key's record row is locked
// by another transaction) keeps its job lease meanwhile: it runs once, as
// attempt 1. Overlap: the record row is locked before the worker starts and
// stays locked until 3 leases after the job's claim (read from its row), so
// the worker's key acquisition is blocked for all that time while the
// leader's rescuer runs every 50 ms. Before the fix the job was only
// renewed while its handler ran: the rescuer took it back and it ran twice
// (attempt 1 after the lock was released, and attempt 2).
func TestSlowKeyAcquireKeepsItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := openLeaseStore(t, "postgres")
	schema := st.(*pgstore.Store).Schema()
	var starts atomic.Int32
	workers := idem.NewWorkers()
	workers.Handle("keyed", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		starts.Add(1)
		return json.RawMessage(`"done"`), nil
	})
	producerless, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := producerless.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "keyed",
		Opts: &idem.EnqueueOpts{IdempotencyKey: "slow-key"}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbtest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var locked int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+pgx.Identifier{schema, "records"}.Sanitize()+
		" WHERE key = 'slow-key' FOR UPDATE) r").Scan(&locked); err != nil || locked != 1 {
		t.Fatalf("locked %d record rows (%v), want the key's one", locked, err)
	}
	c := startLeaseClient(t, st, workers, "slow-key-worker")
	// A pause simulating a store slower than the lease: the lock is held
	// while the worker claims the job and waits for its key.
	time.Sleep(longHandler)
	var claimedAt *time.Time
	if err := conn.QueryRow(ctx, "SELECT started_at FROM "+pgx.Identifier{schema, "jobs"}.Sanitize()+" WHERE id = $1",
		res.Job.ID).Scan(&claimedAt); err != nil {
		t.Fatal(err)
	}
	if claimedAt == nil {
		t.Fatalf("the worker did not claim the job within %s", longHandler)
	}
	time.Sleep(time.Until(claimedAt.Add(longHandler))) // ≥ 3.5 leases blocked after the claim
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	row, err := c.JobWait(wctx, res.Job.ID)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	attempts, err := c.JobAttempts(wctx, "", row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idem.StateCompleted || row.Attempt != 1 || len(attempts) != 1 || starts.Load() != 1 {
		t.Fatalf("state %s attempt %d, %d attempts recorded, %d handler starts; want completed in attempt 1, started once",
			row.State, row.Attempt, len(attempts), starts.Load())
	}
}
