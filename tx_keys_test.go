package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

// bothTxStores runs fn on a SQLite and a PostgreSQL transactional
// environment made from cfg (called once per store).
func bothTxStores(t *testing.T, cfg func() *idem.Config, fn func(t *testing.T, sqlite *txEnv[any])) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, anyEnv(sqliteTxEnv(t, cfg()))) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); fn(t, anyEnv(pgTxEnv(t, cfg()))) })
}

// anyEnv erases the transaction type of env, so one test body serves both
// stores (EnqueueTx and JobCompleteTx are called with the concrete tx).
func anyEnv[TTx any](env *txEnv[TTx]) *txEnv[any] {
	return &txEnv[any]{b: env.b, orders: env.orders, count: env.count,
		inTx: func(ctx context.Context, fn func(ctx context.Context, tx any) error) error {
			return env.inTx(ctx, func(ctx context.Context, tx TTx) error { return fn(ctx, tx) })
		},
		exec: func(ctx context.Context, tx any, q string, args ...any) error {
			return env.exec(ctx, tx.(TTx), q, args...)
		},
		enqueue: func(ctx context.Context, c *idem.Client, tx any, items []idem.EnqueueParams) ([]idem.EnqueueResult, error) {
			return idem.EnqueueTx(ctx, c, tx.(TTx), items)
		},
		complete: func(ctx context.Context, tx any, result any) error {
			return idem.JobCompleteTx(ctx, tx.(TTx), result)
		}}
}

// TestTxCompletionOfKeyedJobCachesItsResult: a keyed job completed by
// JobCompleteTx caches its result for the key as a normal completion does:
// the record holds it, names the job, keeps it for the job's ResultTTL, and
// a later job of the key is answered from the cache without running.
func TestTxCompletionOfKeyedJobCachesItsResult(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config { return &idem.Config{Queues: queues(1), DisableMaintenance: true} }
	bothTxStores(t, cfg, func(t *testing.T, env *txEnv[any]) {
		ctx := context.Background()
		b := env.b
		var runs atomic.Int32
		b.workers.Handle("charge", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			runs.Add(1)
			res := map[string]int64{"by": j.ID}
			if err := env.inTx(ctx, func(txCtx context.Context, tx any) error { return env.complete(ctx, tx, res) }); err != nil {
				return nil, err
			}
			return json.Marshal(res)
		})
		b.start(t)
		zero, ttl := time.Duration(0), time.Hour
		first, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "charge",
			Opts: &idem.EnqueueOpts{IdempotencyKey: "k", DedupWindow: &zero, ResultTTL: &ttl}})
		if err != nil {
			t.Fatal(err)
		}
		row := waitState(t, b, first.Job.ID, idem.StateCompleted)
		want := fmt.Sprintf(`{"by":%d}`, first.Job.ID)
		if string(row.Result) != want || row.WasCached {
			t.Fatalf("first job: result %s cached %v", row.Result, row.WasCached)
		}
		rec, err := b.client.RecordGet(ctx, "", "k")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != idemtype.RecordCompleted || rec.ResultJobID != first.Job.ID || string(rec.Result) != want ||
			rec.LeaseOwner != "" || rec.CompletedAt == nil || rec.ResultExpiresAt == nil ||
			!rec.ResultExpiresAt.Equal(rec.CompletedAt.Add(ttl)) {
			t.Fatalf("record after the tx completion: %+v", rec)
		}
		second, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "charge",
			Opts: &idem.EnqueueOpts{IdempotencyKey: "k", DedupWindow: &zero, ResultTTL: &ttl}})
		if err != nil || second.Existing {
			t.Fatalf("second job of the key: %+v %v", second, err)
		}
		row = waitState(t, b, second.Job.ID, idem.StateCompleted)
		if string(row.Result) != want || !row.WasCached || row.OriginalJobID != first.Job.ID || runs.Load() != 1 {
			t.Fatalf("second job: result %s cached %v original %d; handler ran %d times",
				row.Result, row.WasCached, row.OriginalJobID, runs.Load())
		}
	})
}

// TestTxCompletionAfterCancelIsFenced: a job cancelled while its handler
// runs; the handler then writes its effect and calls JobCompleteTx in one
// transaction: ErrLeaseLost, the effect rolls back, the job stays
// cancelled. On both stores.
func TestTxCompletionAfterCancelIsFenced(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config {
		return &idem.Config{Queues: queues(1), DisableMaintenance: true, LeaseDuration: time.Minute}
	}
	bothTxStores(t, cfg, func(t *testing.T, env *txEnv[any]) {
		ctx := context.Background()
		b := env.b
		if err := env.inTx(ctx, func(ctx context.Context, tx any) error {
			return env.exec(ctx, tx, "CREATE TABLE "+env.orders+" (job_id bigint)")
		}); err != nil {
			t.Fatal(err)
		}
		started, late := make(chan struct{}, 1), make(chan error, 1)
		b.workers.Handle("ship", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			started <- struct{}{}
			<-ctx.Done() // cancelled
			wctx := context.WithoutCancel(ctx)
			err := env.inTx(wctx, func(txCtx context.Context, tx any) error {
				if err := env.exec(txCtx, tx, "INSERT INTO "+env.orders+" VALUES ($1)", j.ID); err != nil {
					return err
				}
				return env.complete(wctx, tx, "shipped")
			})
			late <- err
			return nil, err
		})
		res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship"})
		if err != nil {
			t.Fatal(err)
		}
		b.start(t)
		<-started
		if row, err := b.client.JobCancel(ctx, "", res.Job.ID); err != nil || row.State != idem.StateCancelled {
			t.Fatalf("cancel: %+v %v", row, err)
		}
		if err := <-late; !errors.Is(err, idem.ErrLeaseLost) {
			t.Fatalf("JobCompleteTx after the cancel: %v, want ErrLeaseLost", err)
		}
		if row, err := b.client.JobGet(ctx, "", res.Job.ID); err != nil || row.State != idem.StateCancelled || row.Result != nil {
			t.Fatalf("job: %+v %v, want cancelled without a result", row, err)
		}
		if n, err := env.count(ctx, "SELECT count(*) FROM "+env.orders); err != nil || n != 0 {
			t.Fatalf("orders: %d (%v), want 0", n, err)
		}
	})
}

// TestEnqueueTxKeyRolledBack: keyed jobs enqueued in a transaction that rolls
// back leave neither job nor record: the key is free for another request
// (another fingerprint is no KeyReusedError). On both stores.
func TestEnqueueTxKeyRolledBack(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config { return &idem.Config{} }
	bothTxStores(t, cfg, func(t *testing.T, env *txEnv[any]) {
		ctx := context.Background()
		c := env.b.client
		var res []idem.EnqueueResult
		err := env.inTx(ctx, func(ctx context.Context, tx any) error {
			var err error
			res, err = env.enqueue(ctx, c, tx, []idem.EnqueueParams{
				{Kind: "k", Args: json.RawMessage(`{"a":1}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "order-1"}},
				{Kind: "k", Args: json.RawMessage(`{"a":1}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "order-1"}}})
			if err == nil && (res[0].Err != nil || res[1].Err != nil || !res[1].Existing || res[1].Job.ID != res[0].Job.ID) {
				err = fmt.Errorf("enqueue tx: %+v %+v", res[0], res[1])
			}
			if err != nil {
				t.Error(err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("transaction: %v", err)
		}
		if _, err := c.JobGet(ctx, "", res[0].Job.ID); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("job of the rolled-back key: %v", err)
		}
		if rec, err := c.RecordGet(ctx, "", "order-1"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("record of the rolled-back key: %+v %v", rec, err)
		}
		again, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"a":2}`),
			Opts: &idem.EnqueueOpts{IdempotencyKey: "order-1"}})
		if err != nil || again.Existing {
			t.Fatalf("the key after the rollback: %+v %v", again, err)
		}
	})
}

// TestEnqueueTxDependsOnJobOfSameTx: a job enqueued in a transaction may
// depend on one enqueued earlier in it; both run in order once committed,
// and neither exists when it rolls back. An item the store refuses (an
// unknown dependency) fails alone: the others commit. On both stores.
func TestEnqueueTxDependsOnJobOfSameTx(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config { return &idem.Config{Queues: queues(1), DisableMaintenance: true} }
	bothTxStores(t, cfg, func(t *testing.T, env *txEnv[any]) {
		ctx := context.Background()
		b := env.b
		var order []string
		done := make(chan string, 4)
		b.workers.Handle("step", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
			var a struct{ Name string }
			_ = json.Unmarshal(j.Args, &a)
			done <- a.Name
			return nil, nil
		})
		enqueue := func(rollback bool) (first, second, bad idem.EnqueueResult) {
			err := env.inTx(ctx, func(ctx context.Context, tx any) error {
				r, err := env.enqueue(ctx, b.client, tx, []idem.EnqueueParams{{Kind: "step", Args: json.RawMessage(`{"Name":"first"}`)}})
				if err != nil || r[0].Err != nil {
					return fmt.Errorf("first: %v %+v", err, r)
				}
				first = r[0]
				r, err = env.enqueue(ctx, b.client, tx, []idem.EnqueueParams{
					{Kind: "step", Args: json.RawMessage(`{"Name":"second"}`), Opts: &idem.EnqueueOpts{DependsOn: []int64{first.Job.ID}}},
					{Kind: "step", Args: json.RawMessage(`{"Name":"bad"}`), Opts: &idem.EnqueueOpts{DependsOn: []int64{1 << 40}}}})
				if err != nil || r[0].Err != nil || r[1].Err == nil {
					return fmt.Errorf("second: %v %+v", err, r)
				}
				second, bad = r[0], r[1]
				if rollback {
					return errRollback
				}
				return nil
			})
			if rollback != errors.Is(err, errRollback) || (!rollback && err != nil) {
				t.Fatalf("transaction (rollback %v): %v", rollback, err)
			}
			return first, second, bad
		}
		f, s, _ := enqueue(true)
		for _, id := range []int64{f.Job.ID, s.Job.ID} {
			if _, err := b.client.JobGet(ctx, "", id); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("job %d of the rolled-back transaction: %v", id, err)
			}
		}
		f, s, bad := enqueue(false)
		if bad.Job != nil {
			if _, err := b.client.JobGet(ctx, "", bad.Job.ID); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("job of the refused item (%v): %v", bad.Err, err)
			}
		}
		if row, err := b.client.JobGet(ctx, "", s.Job.ID); err != nil || row.State != idem.StatePending {
			t.Fatalf("dependant before its dependency ran: %+v %v", row, err)
		}
		b.start(t)
		waitState(t, b, s.Job.ID, idem.StateCompleted)
		order = append(order, <-done, <-done)
		if fmt.Sprint(order) != "[first second]" {
			t.Fatalf("ran %v", order)
		}
		if row, err := b.client.JobGet(ctx, "", f.Job.ID); err != nil || row.State != idem.StateCompleted {
			t.Fatalf("dependency: %+v %v", row, err)
		}
	})
}

// TestEnqueueTxRefusedItemsKeepTheTx: items the store refuses inside a
// caller's transaction (a key reused with other arguments, in the batch or
// committed before; an unknown dependency) fail alone: the transaction
// stays usable and commits the caller's writes and the accepted job. On
// both stores.
func TestEnqueueTxRefusedItemsKeepTheTx(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config { return &idem.Config{} }
	bothTxStores(t, cfg, func(t *testing.T, env *txEnv[any]) {
		ctx := context.Background()
		c := env.b.client
		if err := env.inTx(ctx, func(ctx context.Context, tx any) error {
			return env.exec(ctx, tx, "CREATE TABLE "+env.orders+" (id bigint)")
		}); err != nil {
			t.Fatal(err)
		}
		old, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"v":1}`),
			Opts: &idem.EnqueueOpts{IdempotencyKey: "old"}})
		if err != nil {
			t.Fatal(err)
		}
		var res []idem.EnqueueResult
		err = env.inTx(ctx, func(ctx context.Context, tx any) error {
			if err := env.exec(ctx, tx, "INSERT INTO "+env.orders+" VALUES (1)"); err != nil {
				return err
			}
			var err error
			res, err = env.enqueue(ctx, c, tx, []idem.EnqueueParams{
				{Kind: "k", Args: json.RawMessage(`{"v":1}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "new"}},
				{Kind: "k", Args: json.RawMessage(`{"v":2}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "new"}},
				{Kind: "k", Args: json.RawMessage(`{"v":2}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "old"}},
				{Kind: "k", Opts: &idem.EnqueueOpts{DependsOn: []int64{1 << 40}}}})
			if err != nil {
				return err
			}
			return env.exec(ctx, tx, "INSERT INTO "+env.orders+" VALUES (2)")
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if res[0].Err != nil || res[0].Existing {
			t.Fatalf("new key: %+v", res[0])
		}
		for i, r := range res[1:] {
			if r.Err == nil {
				t.Errorf("item %d accepted: %+v", i+1, r)
			}
		}
		if !errors.Is(res[1].Err, idem.ErrKeyReused) || !errors.Is(res[2].Err, idem.ErrKeyReused) {
			t.Errorf("reused keys: %v / %v, want ErrKeyReused", res[1].Err, res[2].Err)
		}
		if n, err := env.count(ctx, "SELECT count(*) FROM "+env.orders); err != nil || n != 2 {
			t.Fatalf("orders: %d (%v), want 2", n, err)
		}
		jobs, _, err := c.JobList(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]bool{}
		for _, j := range jobs {
			got[j.ID] = true
		}
		if len(jobs) != 2 || !got[old.Job.ID] || !got[res[0].Job.ID] {
			t.Fatalf("jobs %v, want the old one and the new key's", got)
		}
	})
}

// TestEnqueueTxRolledBackIDNotReused: the id of a job enqueued in a
// transaction that rolled back was handed to the caller (and to the
// Observer's EventEnqueued); no later job gets it, as no job gets the id
// of a deleted one. On both stores.
func TestEnqueueTxRolledBackIDNotReused(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config { return &idem.Config{} }
	bothTxStores(t, cfg, func(t *testing.T, env *txEnv[any]) {
		ctx := context.Background()
		c := env.b.client
		var rolledBack int64
		err := env.inTx(ctx, func(ctx context.Context, tx any) error {
			res, err := env.enqueue(ctx, c, tx, []idem.EnqueueParams{{Kind: "k"}})
			if err != nil || res[0].Err != nil {
				t.Errorf("enqueue tx: %v %+v", err, res)
				return errRollback
			}
			rolledBack = res[0].Job.ID
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("transaction: %v", err)
		}
		next, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if next.Job.ID <= rolledBack {
			t.Fatalf("the next job got id %d; the rolled-back transaction's job had %d", next.Job.ID, rolledBack)
		}
	})
}
