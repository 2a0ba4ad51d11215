package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// EnqueueTx and JobCompleteTx join the application's own transaction: a job
// exists if and only if the transaction that enqueued it commits, and a
// handler's own writes commit together with its job's completion
// (exactly-once effects). On the embedded SQLite store the application's
// tables live in the store's database file and its transactions run with
// Store.WriteTx; on PostgreSQL they are pgx transactions (the _postgres
// example).
func ExampleEnqueueTx() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()
	err := st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE orders (id text PRIMARY KEY, shipped bool NOT NULL DEFAULT false)")
		return err
	})
	if err != nil {
		panic(err)
	}

	workers := idem.NewWorkers()
	workers.Handle("ship-order", func(ctx context.Context, job *idem.JobRow) (json.RawMessage, error) {
		var a struct{ Order string }
		if err := json.Unmarshal(job.Args, &a); err != nil {
			return nil, err
		}
		result := map[string]bool{"shipped": true}
		err := st.WriteTx(ctx, func(txCtx context.Context, tx *sqlitestore.Tx) error {
			if _, err := tx.ExecContext(txCtx, "UPDATE orders SET shipped = true WHERE id = ?", a.Order); err != nil {
				return err
			}
			return idem.JobCompleteTx(ctx, tx, result) // commits with the UPDATE, or neither
		})
		if err != nil {
			return nil, err
		}
		return json.Marshal(result)
	})
	client, err := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 2}}})
	if err != nil {
		panic(err)
	}

	// The order and its shipping job commit together, or neither exists.
	var jobID int64
	err = st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", "A-17"); err != nil {
			return err
		}
		res, err := idem.EnqueueTx(ctx, client, tx, []idem.EnqueueParams{
			{Kind: "ship-order", Args: json.RawMessage(`{"Order":"A-17"}`)}})
		if err != nil {
			return err
		}
		jobID = res[0].Job.ID
		return res[0].Err
	})
	if err != nil {
		panic(err)
	}
	_ = client.Start(ctx)
	defer client.Stop(ctx)
	job := exampleJobWait(ctx, client, jobID)
	var shipped bool
	err = st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		row, err := tx.QueryRowContext(ctx, "SELECT shipped FROM orders WHERE id = ?", "A-17")
		if err != nil {
			return err
		}
		return row.Scan(&shipped)
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(job.State, string(job.Result), "shipped:", shipped)
	// Output: completed {"shipped":true} shipped: true
}

// On PostgreSQL the application's transactions are pgx transactions on the
// store's database (pgstore joins transactions of type pgx.Tx).
//
// The example has no output check because it needs a PostgreSQL server
// (IDEM_EXAMPLE_DATABASE_URL); tx_test.go runs the same flow on one.
func ExampleEnqueueTx_postgres() {
	ctx := context.Background()
	// The application's pool, configured as the store needs it (READ
	// COMMITTED transactions, a pool large enough for its workers).
	cfg, err := pgstore.PoolConfig(os.Getenv("IDEM_EXAMPLE_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()

	workers := idem.NewWorkers()
	workers.Handle("ship-order", func(ctx context.Context, job *idem.JobRow) (json.RawMessage, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "UPDATE orders SET shipped = true WHERE job_id = $1", job.ID); err != nil {
			return nil, err
		}
		result := map[string]bool{"shipped": true}
		if err := idem.JobCompleteTx(ctx, tx, result); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"shipped":true}`), tx.Commit(ctx)
	})
	client, err := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 2}}})
	if err != nil {
		panic(err)
	}

	// The order and its shipping job commit together, or neither exists.
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	res, err := idem.EnqueueTx(ctx, client, tx, []idem.EnqueueParams{
		{Kind: "ship-order", Args: json.RawMessage(`{"order":"A-17"}`)}})
	if err != nil || res[0].Err != nil {
		panic(fmt.Sprint(err, res))
	}
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, job_id) VALUES ($1, $2)", "A-17", res[0].Job.ID); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	_ = client.Start(ctx)
	defer client.Stop(ctx)
	job := exampleJobWait(ctx, client, res[0].Job.ID)
	fmt.Println(job.State, string(job.Result))
}
