package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// pgSetup returns a client on a fresh PostgreSQL schema and the pool of the
// application sharing that database.
func pgSetup(t *testing.T, cfg *idem.Config) (*bundle, *pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	url, schema := dbtest.NewSchema(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var c idem.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Workers == nil {
		c.Workers = idem.NewWorkers()
	}
	c.Logger = quietLogger()
	client, err := idem.NewClient(st, &c)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{client: client, workers: c.Workers}, pool, schema
}

// txEnv is one store's way of running the application's own transaction,
// so the transactional tests run the same flow on both stores.
type txEnv[TTx any] struct {
	b *bundle
	// inTx runs fn in a transaction of the application's database and
	// commits it when fn returns nil.
	inTx func(ctx context.Context, fn func(ctx context.Context, tx TTx) error) error
	// exec runs a statement inside tx.
	exec func(ctx context.Context, tx TTx, q string, args ...any) error
	// count runs a SELECT count(*) outside any transaction.
	count func(ctx context.Context, q string) (int, error)
	// orders is the application's orders table.
	orders string
	// enqueue and complete are EnqueueTx and JobCompleteTx, set by anyEnv
	// (whose transactions are of type any).
	enqueue  func(ctx context.Context, c *idem.Client, tx any, items []idem.EnqueueParams) ([]idem.EnqueueResult, error)
	complete func(ctx context.Context, tx any, result any) error
}

// sqliteTxEnv runs the application's transactions with sqlitestore.WriteTx,
// on a table in the store's own database file.
func sqliteTxEnv(t *testing.T, cfg *idem.Config) *txEnv[*sqlitestore.Tx] {
	b := setup(t, cfg)
	st := b.store
	env := &txEnv[*sqlitestore.Tx]{b: b, orders: "orders",
		inTx: st.WriteTx,
		exec: func(ctx context.Context, tx *sqlitestore.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}}
	env.count = func(ctx context.Context, q string) (int, error) {
		var n int
		err := st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
			row, err := tx.QueryRowContext(ctx, q)
			if err != nil {
				return err
			}
			return row.Scan(&n)
		})
		return n, err
	}
	return env
}

// pgTxEnv runs the application's transactions on the store's pgx pool.
func pgTxEnv(t *testing.T, cfg *idem.Config) *txEnv[pgx.Tx] {
	b, pool, schema := pgSetup(t, cfg)
	return &txEnv[pgx.Tx]{b: b, orders: pgx.Identifier{schema, "orders"}.Sanitize(),
		inTx: func(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return fn(ctx, tx) })
		},
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		count: func(ctx context.Context, q string) (int, error) {
			var n int
			err := pool.QueryRow(ctx, q).Scan(&n)
			return n, err
		}}
}

// TestTransactionalEnqueueAndComplete shows exactly-once effects on both
// stores: a job enqueued in a rolled-back transaction never exists, and a
// handler's own write commits together with its job's completion.
func TestTransactionalEnqueueAndComplete(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config {
		return &idem.Config{Queues: queues(2), Retry: idem.RetryPolicy{Base: 10 * time.Millisecond}}
	}
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testTxFlow(t, sqliteTxEnv(t, cfg())) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testTxFlow(t, pgTxEnv(t, cfg())) })
}

// errRollback makes a test transaction roll back.
var errRollback = errors.New("roll back")

func testTxFlow[TTx any](t *testing.T, env *txEnv[TTx]) {
	ctx := context.Background()
	b := env.b
	if err := env.inTx(ctx, func(ctx context.Context, tx TTx) error {
		return env.exec(ctx, tx, "CREATE TABLE "+env.orders+" (id text PRIMARY KEY, job_id bigint)")
	}); err != nil {
		t.Fatal(err)
	}
	fail := true
	b.workers.Handle("place-order", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a struct{ Order string }
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		err := env.inTx(ctx, func(txCtx context.Context, tx TTx) error {
			if err := env.exec(txCtx, tx, "INSERT INTO "+env.orders+" VALUES ($1, $2)", a.Order, j.ID); err != nil {
				return err
			}
			if err := idem.JobCompleteTx(ctx, tx, map[string]string{"order": a.Order}); err != nil {
				return err
			}
			if fail { // the first attempt dies before commit: neither write survives
				fail = false
				return errors.New("crash before commit")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return json.RawMessage(`{"order":"` + a.Order + `"}`), nil
	})

	// Rolled back: the job never existed.
	var res []idem.EnqueueResult
	err := env.inTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		res, err = idem.EnqueueTx(ctx, b.client, tx, []idem.EnqueueParams{{Kind: "place-order", Args: json.RawMessage(`{"Order":"A"}`)}})
		if err != nil || res[0].Err != nil {
			t.Errorf("enqueue tx: %v %v", err, res)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) || len(res) != 1 || res[0].Job == nil {
		t.Fatalf("rolled-back transaction: %v %v", err, res)
	}
	if _, err := b.client.JobGet(ctx, "", res[0].Job.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("rolled-back job exists: %v", err)
	}

	// Committed: the job runs; the first attempt rolls back, the second commits.
	err = env.inTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		res, err = idem.EnqueueTx(ctx, b.client, tx, []idem.EnqueueParams{{Kind: "place-order", Args: json.RawMessage(`{"Order":"B"}`),
			Opts: &idem.EnqueueOpts{Metadata: json.RawMessage(`{"source":"checkout"}`)}}})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		return err
	})
	if err != nil {
		t.Fatalf("enqueue tx: %v", err)
	}
	b.start(t)
	row := waitState(t, b, res[0].Job.ID, idem.StateCompleted)
	if row.Attempt != 2 || string(row.Result) != `{"order":"B"}` {
		t.Fatalf("completed job: attempt %d result %s", row.Attempt, row.Result)
	}
	if n, err := env.count(ctx, "SELECT count(*) FROM "+env.orders); err != nil || n != 1 {
		t.Fatalf("orders: %d (%v), want exactly 1", n, err)
	}
}

func TestEnqueueTxNeedsSupport(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := idem.EnqueueTx(context.Background(), b.client, struct{}{}, []idem.EnqueueParams{{Kind: "k"}})
	if !errors.Is(err, idem.ErrNoTxSupport) {
		t.Fatalf("want ErrNoTxSupport, got %v", err)
	}
}

// TestLateTxCompletionIsFencedSQLite: a handler whose lease was taken back
// while it ran (the rescuer is called with a clock past the lease, as it
// would run once the lease lapsed) writes its effect and calls
// JobCompleteTx in one WriteTx: the completion fails with ErrLeaseLost, the
// effect rolls back with it, and the retry's effect is the only one.
func TestLateTxCompletionIsFencedSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := sqliteTxEnv(t, &idem.Config{Queues: queues(1), LeaseDuration: time.Second})
	b, st := env.b, env.b.store
	if err := st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE orders (job_id bigint, attempt int)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	lateErr := make(chan error, 1)
	b.workers.Handle("ship", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		wctx := context.WithoutCancel(ctx) // the fence must hold for a handler that goes on
		if j.Attempt == 1 {
			got, err := st.JobRescue(wctx, &store.JobRescueParams{Now: time.Now().Add(2 * time.Second), Limit: 10})
			if err != nil || len(got) != 1 || got[0].ID != j.ID {
				return nil, fmt.Errorf("rescue: %v %v", got, err)
			}
		}
		err := st.WriteTx(wctx, func(txCtx context.Context, tx *sqlitestore.Tx) error {
			if _, err := tx.ExecContext(txCtx, "INSERT INTO orders VALUES (?, ?)", j.ID, j.Attempt); err != nil {
				return err
			}
			return idem.JobCompleteTx(wctx, tx, "shipped")
		})
		if j.Attempt == 1 {
			lateErr <- err
		}
		if err != nil {
			return nil, err
		}
		return json.RawMessage(`"shipped"`), nil
	})
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship"})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	row := waitState(t, b, res.Job.ID, idem.StateCompleted)
	if err := <-lateErr; !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("late JobCompleteTx: %v, want ErrLeaseLost", err)
	}
	if row.Attempt != 2 {
		t.Fatalf("completed at attempt %d, want 2", row.Attempt)
	}
	attempts := orderAttempts(t, st)
	if fmt.Sprint(attempts) != "[2]" {
		t.Fatalf("order rows by attempts %v, want exactly one, by attempt 2", attempts)
	}
}

// orderAttempts returns the attempt column of the orders table that the
// handlers of these tests write in their job's transaction.
func orderAttempts(t *testing.T, st *sqlitestore.Store) []int {
	t.Helper()
	ctx := t.Context()
	var attempts []int
	if err := st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT attempt FROM orders")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a int
			if err := rows.Scan(&a); err != nil {
				return err
			}
			attempts = append(attempts, a)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	return attempts
}
