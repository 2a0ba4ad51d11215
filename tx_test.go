package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/pgstore"
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

// TestTransactionalEnqueueAndComplete shows exactly-once effects on
// PostgreSQL: a job enqueued in a rolled-back transaction never exists, and a
// handler's own write commits together with its job's completion.
func TestTransactionalEnqueueAndComplete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool, schema := pgSetup(t, &idem.Config{Queues: queues(2), Retry: idem.RetryPolicy{Base: 10 * time.Millisecond}})
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (id text PRIMARY KEY, job_id bigint)"); err != nil {
		t.Fatal(err)
	}
	fail := true
	b.workers.Handle("place-order", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a struct{ Order string }
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" VALUES ($1, $2)", a.Order, j.ID); err != nil {
			return nil, err
		}
		result := map[string]string{"order": a.Order}
		if err := idem.JobCompleteTx(ctx, pgx.Tx(tx), result); err != nil {
			return nil, err
		}
		if fail { // the first attempt dies before commit: neither write survives
			fail = false
			return nil, errors.New("crash before commit")
		}
		return json.RawMessage(`{"order":"` + a.Order + `"}`), tx.Commit(ctx)
	})

	// Rolled back: the job never existed.
	tx, _ := pool.Begin(ctx)
	res, err := idem.EnqueueTx(ctx, b.client, pgx.Tx(tx), []idem.EnqueueParams{{Kind: "place-order", Args: json.RawMessage(`{"Order":"A"}`)}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue tx: %v %v", err, res)
	}
	_ = tx.Rollback(ctx)
	if _, err := b.client.JobGet(ctx, "", res[0].Job.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("rolled-back job exists: %v", err)
	}

	// Committed: the job runs; the first attempt rolls back, the second commits.
	tx, _ = pool.Begin(ctx)
	res, err = idem.EnqueueTx(ctx, b.client, pgx.Tx(tx), []idem.EnqueueParams{{Kind: "place-order", Args: json.RawMessage(`{"Order":"B"}`),
		Opts: &idem.EnqueueOpts{Metadata: json.RawMessage(`{"source":"checkout"}`)}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue tx: %v %v", err, res)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	row := waitState(t, b, res[0].Job.ID, idem.StateCompleted)
	if row.Attempt != 2 || string(row.Result) != `{"order":"B"}` {
		t.Fatalf("completed job: attempt %d result %s", row.Attempt, row.Result)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+orders).Scan(&n); err != nil || n != 1 {
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
