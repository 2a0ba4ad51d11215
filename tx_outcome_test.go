package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestTxCompletionStandsWhateverTheHandlerReturns: a handler writes its
// effect and completes its job with JobCompleteTx in one transaction that
// commits, then returns an error, another result, or panics. The committed
// completion stands (the job completed at attempt 1 with the result that
// committed, the handler never runs again) and the observer, so /metrics,
// counts it once as completed. When the transaction rolls back, the
// handler's own result completes the job, once. On both stores.
func TestTxCompletionStandsWhateverTheHandlerReturns(t *testing.T) {
	t.Parallel()
	for _, after := range []string{"error", "other-result", "panic", "same-result", "rolled-back"} {
		t.Run(after, func(t *testing.T) {
			t.Parallel()
			t.Run("sqlite", func(t *testing.T) {
				t.Parallel()
				obs := newEventCounts()
				testTxCompletionStands(t, sqliteTxEnv(t, txOutcomeConfig(obs)), obs, after)
			})
			t.Run("postgres", func(t *testing.T) {
				t.Parallel()
				obs := newEventCounts()
				testTxCompletionStands(t, pgTxEnv(t, txOutcomeConfig(obs)), obs, after)
			})
		})
	}
}

func txOutcomeConfig(obs idem.Observer) *idem.Config {
	return &idem.Config{Queues: queues(1), Observer: obs, DisableMaintenance: true,
		Retry: idem.RetryPolicy{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}}
}

func testTxCompletionStands[TTx any](t *testing.T, env *txEnv[TTx], obs *eventCounts, after string) {
	ctx := context.Background()
	b := env.b
	if err := env.inTx(ctx, func(ctx context.Context, tx TTx) error {
		return env.exec(ctx, tx, "CREATE TABLE "+env.orders+" (job_id bigint)")
	}); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	b.workers.Handle("ship", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		runs.Add(1)
		if err := env.inTx(ctx, func(txCtx context.Context, tx TTx) error {
			if err := env.exec(txCtx, tx, "INSERT INTO "+env.orders+" VALUES ($1)", j.ID); err != nil {
				return err
			}
			if err := idem.JobCompleteTx(ctx, tx, "shipped"); err != nil {
				return err
			}
			if after == "rolled-back" {
				return errRollback
			}
			return nil
		}); err != nil && !errors.Is(err, errRollback) {
			return nil, err
		}
		switch after {
		case "rolled-back": // the runtime completes it with this result
			return json.RawMessage(`"returned"`), nil
		case "error":
			return nil, errors.New("failed after the commit")
		case "other-result":
			return json.RawMessage(`"something else"`), nil
		case "panic":
			panic("after the commit")
		}
		return json.RawMessage(`"shipped"`), nil
	})
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	b.start(t)
	row := waitState(t, b, id, idem.StateCompleted)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.client.Stop(sctx); err != nil { // every finish answered
		t.Fatal(err)
	}
	wantResult, wantOrders := `"shipped"`, 1
	if after == "rolled-back" {
		wantResult, wantOrders = `"returned"`, 0
	}
	if row.Attempt != 1 || string(row.Result) != wantResult || runs.Load() != 1 {
		t.Errorf("job: attempt %d result %s, handler ran %d times; want attempt 1, %s, once",
			row.Attempt, row.Result, runs.Load(), wantResult)
	}
	if n, err := env.count(ctx, "SELECT count(*) FROM "+env.orders); err != nil || n != wantOrders {
		t.Errorf("orders: %d (%v), want %d", n, err, wantOrders)
	}
	if n, outcomes := obs.of(id); n[idem.EventFinished] != 1 || outcomes[0] != idemtype.OutcomeCompleted {
		t.Errorf("observer: events %v, finished outcomes %v; want one completed finish", n, outcomes)
	}
}

// TestTxCompletionCountedWhenHeartbeatFindsItDone: a handler that goes on
// after its JobCompleteTx committed meets the heartbeater, which finds the
// job no longer running under its lease and cancels the handler (its job
// is done). The committed completion is still reported once, as
// completed. On both stores.
func TestTxCompletionCountedWhenHeartbeatFindsItDone(t *testing.T) {
	t.Parallel()
	cfg := func(obs idem.Observer) *idem.Config {
		return &idem.Config{Queues: queues(1), Observer: obs, DisableMaintenance: true, LeaseDuration: time.Second}
	}
	run := func(t *testing.T, b *bundle, complete func(ctx context.Context) error, obs *eventCounts) {
		ctx := context.Background()
		causes := make(chan error, 1)
		b.workers.Handle("ship", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			if err := complete(ctx); err != nil {
				return nil, err
			}
			<-ctx.Done() // cleanup that outlasts a heartbeat
			causes <- context.Cause(ctx)
			return json.RawMessage(`"shipped"`), nil
		})
		res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship"})
		if err != nil {
			t.Fatal(err)
		}
		b.start(t)
		if cause := <-causes; !errors.Is(cause, idem.ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v", cause)
		}
		row := waitState(t, b, res.Job.ID, idem.StateCompleted)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := b.client.Stop(sctx); err != nil {
			t.Fatal(err)
		}
		if row.Attempt != 1 || string(row.Result) != `"shipped"` {
			t.Errorf("job: attempt %d result %s", row.Attempt, row.Result)
		}
		if n, outcomes := obs.of(res.Job.ID); n[idem.EventFinished] != 1 || outcomes[0] != idemtype.OutcomeCompleted {
			t.Errorf("observer: events %v, finished outcomes %v; want one completed finish", n, outcomes)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		obs := newEventCounts()
		env := sqliteTxEnv(t, cfg(obs))
		run(t, env.b, func(ctx context.Context) error {
			return env.inTx(ctx, func(_ context.Context, tx *sqlitestore.Tx) error { return idem.JobCompleteTx(ctx, tx, "shipped") })
		}, obs)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		obs := newEventCounts()
		env := pgTxEnv(t, cfg(obs))
		run(t, env.b, func(ctx context.Context) error {
			return env.inTx(ctx, func(_ context.Context, tx pgx.Tx) error { return idem.JobCompleteTx(ctx, tx, "shipped") })
		}, obs)
	})
}
