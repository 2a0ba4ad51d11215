package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestListenReconnectWakesEveryQueue (PostgreSQL): after its LISTEN
// connection was lost, the store sends "" ("any queue may have jobs":
// notifications sent meanwhile are lost), and every producer must look for
// work then instead of at its next poll. The job here became due without a
// notification (scheduled, its time reached on the worker's clock; no
// promoter runs) and the poll is an hour away: only that wake-up can start
// it. Before the fix the notifier woke the queue named "", that is none.
func TestListenReconnectWakesEveryQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, schema := dbtest.NewSchema(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, CallerClock: true,
		ListenReconnectDelay: 10 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &fakeClock{now: time.Now().UTC()}
	ran := make(chan int64, 1)
	workers := idem.NewWorkers()
	workers.Handle("due", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
		ran <- j.ID
		return nil, nil
	})
	c, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(),
		PollInterval: time.Hour, DisableMaintenance: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "due", Opts: &idem.EnqueueOpts{RunAt: clock.Now().Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(ctx) })
	clock.Add(2 * time.Minute) // due now; nothing announces it
	listening := `LISTEN "` + schema + `"`
	dbtest.Until(t, pool, true, nil, "the client's LISTEN connection never showed up",
		`SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()`, listening)
	select {
	case id := <-ran:
		if id != res.Job.ID {
			t.Fatalf("ran job %d, want %d", id, res.Job.ID)
		}
	case <-time.After(leaseTimeout):
		t.Fatal("the due job did not start after the LISTEN connection came back (its queue was not woken)")
	}
}

// TestCancelDuringListenReconnectReachesHandler (PostgreSQL): a running job
// cancelled by another client while the worker's LISTEN connection is down
// (its cancel notice is lost) must still reach the handler when the
// connection comes back, not at the next heartbeat (a third of a 10-minute
// lease here): the notifier's "" after the reconnect makes the heartbeater
// renew at once, which finds the lease lost. The connection is cut, and the
// job cancelled, while the listener waits out a 2 s reconnect delay.
func TestCancelDuringListenReconnectReachesHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, schema := dbtest.NewSchema(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema,
		ListenReconnectDelay: 2 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()}) // never started: no running registry
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	workers := idem.NewWorkers()
	workers.Handle("long", func(ctx context.Context, _ *idem.JobRow) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	c, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(1), Logger: quietLogger(),
		LeaseDuration: 10 * time.Minute, PollInterval: 20 * time.Millisecond, DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
	res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "long"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(leaseTimeout):
		t.Fatal("the handler never started")
	}
	waitListening(t, schema, 1)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1 AND pid <> pg_backend_pid()`, `LISTEN "`+schema+`"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminated %d LISTEN connections (%v), want the worker's one", n, err)
	}
	if _, err := other.JobCancel(ctx, "", res.Job.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	select {
	case cause := <-stopped:
		if cause == nil {
			t.Fatal("the handler's context ended without a cause")
		}
	case <-time.After(leaseTimeout):
		t.Fatal("the handler still runs 30s after its cancel, made while the LISTEN connection was down")
	}
}
