package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
)

func TestJobWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("returns a job finished by this client's workers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &idem.Config{Queues: queues(2), DisableMaintenance: true})
		release := make(chan struct{})
		b.workers.Handle("slow", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			<-release
			return json.RawMessage(`{"ok":true}`), nil
		})
		r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "slow"})
		if err != nil {
			t.Fatal(err)
		}
		b.start(t)
		got := make(chan *idem.JobRow, 1)
		go func() {
			row, err := b.client.JobWait(ctx, r.Job.ID)
			if err != nil {
				t.Error(err)
			}
			got <- row
		}()
		close(release)
		row := <-got
		if row == nil || row.State != idem.StateCompleted || string(row.Result) != `{"ok":true}` {
			t.Fatalf("JobWait returned %+v", row)
		}
	})

	t.Run("returns dead and cancelled jobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &idem.Config{Queues: queues(2), DisableMaintenance: true})
		b.workers.Handle("bad", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			return nil, idem.JobPermanent(errors.New("bad"))
		})
		bad, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "bad"})
		later, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "bad",
			Opts: &idem.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}})
		b.start(t)
		if row := waitState(t, b, bad.Job.ID, idem.StateDead); row.LastError == "" {
			t.Fatal("dead job without its error")
		}
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got := make(chan *idem.JobRow, 1)
		go func() {
			row, _ := b.client.JobWait(waitCtx, later.Job.ID)
			got <- row
		}()
		if _, err := b.client.JobCancel(ctx, "", later.Job.ID); err != nil {
			t.Fatal(err)
		}
		if row := <-got; row == nil || row.State != idem.StateCancelled {
			t.Fatalf("JobWait after cancel returned %+v", row)
		}
	})

	t.Run("returns a job finished by another client on the same store", func(t *testing.T) {
		t.Parallel()
		waiter := setup(t, nil) // insert-only: it never works the job itself
		workers := idem.NewWorkers()
		workers.Handle("remote", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
			return json.RawMessage(`1`), nil
		})
		worker, err := idem.NewClient(waiter.store, &idem.Config{Workers: workers, Queues: queues(1),
			Logger: quietLogger(), DisableMaintenance: true})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := waiter.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "remote"})
		(&bundle{client: worker}).start(t)
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		row, err := waiter.client.JobWait(waitCtx, r.Job.ID)
		if err != nil || row.State != idem.StateCompleted || string(row.Result) != "1" {
			t.Fatalf("JobWait: %+v %v", row, err)
		}
	})

	t.Run("returns a job finished by a pull worker", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		r, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "pulled"})
		jobs, err := b.client.Claim(ctx, idem.ClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "w"})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		got := make(chan *idem.JobRow, 1)
		go func() {
			row, _ := b.client.JobWait(ctx, r.Job.ID)
			got <- row
		}()
		if _, err := b.client.Fail(ctx, "", jobs[0].ID, jobs[0].LeaseToken, idem.FailParams{Error: "no", NoRetry: true}); err != nil {
			t.Fatal(err)
		}
		if row := <-got; row == nil || row.State != idem.StateDead || row.LastError != "no" {
			t.Fatalf("JobWait returned %+v", row)
		}
	})

	t.Run("ends with the context", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		r, _ := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "never"})
		waitCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := b.client.JobWait(waitCtx, r.Job.ID)
			done <- err
		}()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("JobWait after cancel: %v", err)
		}
		deadline, stop := context.WithTimeout(ctx, 20*time.Millisecond)
		defer stop()
		if _, err := b.client.JobWait(deadline, r.Job.ID); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("JobWait past deadline: %v", err)
		}
	})

	t.Run("unknown job is not found", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		if _, err := b.client.JobWait(ctx, 424242); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("JobWait of an unknown job: %v", err)
		}
	})
}

func TestJobWaitPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	waiter, pool, schema := pgSetup(t, nil)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	workers := idem.NewWorkers()
	workers.Handle("pg", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		return json.RawMessage(`"done"`), nil
	})
	worker, err := idem.NewClient(st, &idem.Config{Workers: workers, Queues: queues(2), Logger: quietLogger(),
		DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	(&bundle{client: worker}).start(t)
	r, err := waiter.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "pg"})
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	row, err := waiter.client.JobWait(waitCtx, r.Job.ID)
	if err != nil || row.State != idem.StateCompleted || string(row.Result) != `"done"` {
		t.Fatalf("JobWait on PostgreSQL: %+v %v", row, err)
	}
	// The worker's own client hears its completer at once.
	r2, _ := worker.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "pg"})
	if row, err := worker.JobWait(waitCtx, r2.Job.ID); err != nil || row.State != idem.StateCompleted {
		t.Fatalf("local JobWait on PostgreSQL: %+v %v", row, err)
	}
}

func TestEnqueueTxSharesEnqueueManyPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool, _ := pgSetup(t, nil)
	items := []idem.EnqueueParams{
		{Kind: "k", Opts: &idem.EnqueueOpts{IdempotencyKey: "same"}},
		{Kind: "k", Opts: &idem.EnqueueOpts{IdempotencyKey: "same"}},
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := idem.EnqueueTx(ctx, b.client, tx, []idem.EnqueueParams{{Kind: ""}, {Kind: "k"}}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("invalid item: %v", err)
	}
	_, many := idem.EnqueueTx(ctx, b.client, tx, []idem.EnqueueParams{{Kind: "k"}, {Kind: ""}})
	_, plain := b.client.EnqueueMany(ctx, []idem.EnqueueParams{{Kind: "k"}, {Kind: ""}})
	if many == nil || plain == nil || many.Error() != plain.Error() {
		t.Fatalf("errors differ: tx %v, plain %v", many, plain)
	}
	res, err := idem.EnqueueTx(ctx, b.client, tx, items)
	if err != nil || res[0].Existing || !res[1].Existing || res[1].Job.ID != res[0].Job.ID {
		t.Fatalf("dedup in tx: %+v %v", res, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	stats, err := b.client.CacheStats(ctx, "")
	if err != nil || stats.DedupHits != 1 {
		t.Fatalf("dedup hits after EnqueueTx: %+v %v", stats, err)
	}
}
