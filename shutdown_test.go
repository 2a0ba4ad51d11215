package idem_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// startShutdownClient starts a client on st working the default queue with
// workers; the test stops it.
func startShutdownClient(t *testing.T, st store.Store, workers *idem.Workers, lease time.Duration) *idem.Client {
	t.Helper()
	return startClient(t, st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(),
		LeaseDuration: lease, PollInterval: 20 * time.Millisecond, DisableMaintenance: true})
}

// startClient makes a client on st with cfg and starts it; stopping it is
// the caller's.
func startClient(t *testing.T, st store.Store, cfg *idem.Config) *idem.Client {
	t.Helper()
	c, err := idem.NewClient(st, cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return c
}

// TestStopCancelsHandlersBeforeReleasingLeases: when Stop's deadline has
// passed, a running handler is told to stop while its job is still leased
// to this process; the lease goes back to the store only after the handler
// returned (or a grace ran out), and the job is then available again with
// its attempt given back. Before the fix the lease was released first and
// the handler cancelled afterwards: meanwhile another process could claim
// and start the job while the old handler still ran (the handler here saw
// its job already available when it learnt of the shutdown).
func TestStopCancelsHandlersBeforeReleasingLeases(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			started := make(chan struct{}, 1)
			seen := make(chan idem.JobState, 1)
			workers := idem.NewWorkers()
			workers.Handle("stop-me", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
				started <- struct{}{}
				<-ctx.Done()
				row, err := st.JobGet(context.Background(), &store.JobGetParams{ID: j.ID})
				if err != nil {
					t.Errorf("get job in handler: %v", err)
					seen <- ""
				} else {
					seen <- row.State
				}
				return nil, context.Cause(ctx)
			})
			c := startShutdownClient(t, st, workers, 30*time.Second)
			res, err := c.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "stop-me"})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-started:
			case <-time.After(leaseTimeout):
				t.Fatal("handler never started")
			}
			expired, cancel := context.WithCancel(context.Background())
			cancel() // Stop's deadline has passed: running handlers are stopped
			if err := c.Stop(expired); err != nil {
				t.Fatalf("stop: %v", err)
			}
			select {
			case state := <-seen:
				if state != idem.StateRunning {
					t.Fatalf("the handler was cancelled after its job was released (job %s): another process could already run it", state)
				}
			case <-time.After(leaseTimeout):
				t.Fatal("handler was never cancelled")
			}
			row, err := st.JobGet(context.Background(), &store.JobGetParams{ID: res.Job.ID})
			if err != nil {
				t.Fatal(err)
			}
			if row.State != idem.StateAvailable || row.Attempt != 0 {
				t.Fatalf("after Stop the job is %s in attempt %d, want available in attempt 0 (released)", row.State, row.Attempt)
			}
		})
	}
}

// TestStopIsBoundedByItsContextWhileFinishesHang (PostgreSQL): a finish that
// cannot be written (its job row is locked by another transaction, as a
// store that hangs) does not hold Stop beyond its context: Stop returns,
// the finish is abandoned and logged, the job left to the rescuer. Before
// the fix the completer's drain tried each batch 5 times for up to 30 s
// each, whatever Stop's context said.
func TestStopIsBoundedByItsContextWhileFinishesHang(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := openLeaseStore(t, "postgres")
	schema := st.(*pgstore.Store).Schema()
	_, tx := pgLockTx(t) // rolled back at the end: lets the abandoned finish through before the store closes
	locked := make(chan struct{}, 1)
	workers := idem.NewWorkers()
	workers.Handle("hang-finish", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
		// Lock the job's row until the test ends: its finish cannot be
		// written meanwhile.
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+pgx.Identifier{schema, "jobs"}.Sanitize()+
			" WHERE id = $1 FOR UPDATE) r", j.ID).Scan(&n); err != nil || n != 1 {
			t.Errorf("locked %d job rows (%v)", n, err)
		}
		locked <- struct{}{}
		return json.RawMessage(`"done"`), nil
	})
	// A short lease: the heartbeater's stuck renewal gives up after a third
	// of it.
	c := startShutdownClient(t, st, workers, 3*time.Second)
	if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "hang-finish"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-locked:
	case <-time.After(leaseTimeout):
		t.Fatal("handler never ran")
	}
	// 20 s: well under one 30 s finish try.
	stopWithin(t, c, 500*time.Millisecond, 20*time.Second, func() { _ = tx.Rollback(ctx) },
		"Stop still waits for a finish that cannot be written, long after its context ended")
}

// pgLockTx connects to the test database on a connection of its own and
// begins a transaction there, for a test to hold locks with; at the test's
// end the transaction is rolled back and the connection closed, before the
// stores the test opened earlier close.
func pgLockTx(t *testing.T) (*pgx.Conn, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	return conn, tx
}

// stopWithin stops c with a context of timeout and fails the test unless
// Stop returns within limit (Stop may end with its context's error: that
// is logged); when it does not, unblock lets it return, so the test ends.
func stopWithin(t *testing.T, c *idem.Client, timeout, limit time.Duration, unblock func(), late string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(sctx) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Logf("stop: %v", err)
		}
	case <-time.After(limit):
		t.Error(late)
		unblock()
		<-stopped
	}
}

// claimSeen is a store that counts the claims in flight; the claims
// themselves are the real store's.
type claimSeen struct {
	store.Store
	inFlight atomic.Int32
}

func (s *claimSeen) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	return s.Store.JobClaim(ctx, p)
}

// TestStopIsBoundedByItsContextWhileAClaimHangs (PostgreSQL): a claim that
// cannot get through (the jobs table is locked by another transaction, as a
// database that does not answer) does not hold Stop for a whole lease after
// Stop's context ended. Before the fix a producer's claim ran under a
// context Stop did not cancel, bounded only by the lease (30 s here), and
// Client.Stop waited for it before looking at its own context.
func TestStopIsBoundedByItsContextWhileAClaimHangs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, _ := openLeaseStore(t, "postgres")
	jobs := pgx.Identifier{raw.(*pgstore.Store).Schema(), "jobs"}.Sanitize()
	st := &claimSeen{Store: raw}
	workers := idem.NewWorkers()
	workers.Handle("never", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
	c := startShutdownClient(t, st, workers, 30*time.Second)
	conn, tx := pgLockTx(t) // rolled back at the end: lets the claim through before the store closes
	if _, err := tx.Exec(ctx, "LOCK TABLE "+jobs+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// The producer polls every 20 ms: wait until its claim waits for the
	// lock.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(leaseTimeout)
	for {
		var waiting bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = $1::regclass AND NOT granted)",
			jobs).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting && st.inFlight.Load() > 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the producer's claim never waited for the lock")
		}
	}
	// 15 s: well under the 30 s lease.
	stopWithin(t, c, 200*time.Millisecond, 15*time.Second, func() { _ = tx.Rollback(ctx) },
		"Stop still waits for a claim that cannot get through, long after its context ended")
}
