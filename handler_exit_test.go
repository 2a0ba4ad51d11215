package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestGoexitHandlerFailsItsAttempt (both stores): a handler that calls
// runtime.Goexit (as t.FailNow does, or a library) fails its attempt with
// an error naming Goexit, is retried per the policy in the queue's one
// worker slot, and completes. The goroutine ended without returning, so the
// job stayed registered as running here, its lease renewed until Stop: it
// never finished nor was retried, and its slot stayed taken.
func TestGoexitHandlerFailsItsAttempt(t *testing.T) {
	t.Parallel()
	bothBundles(t, func() *idem.Config {
		return &idem.Config{Queues: queues(1), DisableMaintenance: true,
			Retry: idem.RetryPolicy{Delays: []time.Duration{10 * time.Millisecond}, Jitter: -1}}
	}, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		var calls atomic.Int32
		b.workers.Handle("exits", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			if calls.Add(1) == 1 {
				runtime.Goexit()
			}
			return json.RawMessage(`"done"`), nil
		})
		b.start(t)
		res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "exits", Opts: &idem.EnqueueOpts{MaxAttempts: 2}})
		if err != nil {
			t.Fatal(err)
		}
		row := waitState(t, b, res.Job.ID, idem.StateCompleted)
		if row.Attempt != 2 || string(row.Result) != `"done"` {
			t.Fatalf("job completed at attempt %d with %s, want attempt 2 with \"done\"", row.Attempt, row.Result)
		}
		atts, err := b.client.JobAttempts(ctx, "", res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(atts) != 2 || atts[0].Outcome != idemtype.OutcomeFailed || !strings.Contains(atts[0].Error, "runtime.Goexit") {
			t.Fatalf("attempts %+v, want a first one failed naming runtime.Goexit", atts)
		}
	})
}

// TestPanickedIsTheRecoveredPanic (both stores): EventFinished.Panicked
// says the executor recovered a panic of the handler, not what the
// error's text looks like: a handler returning an error that reads
// "panic: …" is not reported panicked, one that panics is. Panicked was
// read from the text's "panic: " start, so the first was reported
// panicked too.
func TestPanickedIsTheRecoveredPanic(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			obs := &panicFinishObserver{finished: make(chan idem.JobEvent, 2)}
			cfg := &idem.Config{Queues: queues(2), Observer: obs, DisableMaintenance: true}
			var b *bundle
			if backend == "sqlite" {
				b = setup(t, cfg)
			} else {
				b, _, _ = pgSetup(t, cfg)
			}
			b.workers.Handle("looks", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				return nil, errors.New("panic: not really, an error")
			})
			b.workers.Handle("panics", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				panic("boom")
			})
			b.start(t)
			for _, kind := range []string{"looks", "panics"} {
				if _, err := b.client.EnqueueRaw(t.Context(), idem.EnqueueParams{Kind: kind, Opts: &idem.EnqueueOpts{MaxAttempts: 1}}); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]idem.JobEvent{}
			for len(got) < 2 {
				select {
				case e := <-obs.finished:
					got[e.Kind] = e
				case <-time.After(waitTimeout):
					t.Fatalf("finished %v, want both jobs", got)
				}
			}
			if e := got["looks"]; e.Panicked || e.State != idem.StateDead || !strings.HasPrefix(e.Err, "panic: not really") {
				t.Errorf("an error reading like a panic: finished %+v, want dead and not Panicked", e)
			}
			if e := got["panics"]; !e.Panicked || e.State != idem.StateDead || !strings.HasPrefix(e.Err, "panic: boom") {
				t.Errorf("a panic: finished %+v, want dead and Panicked", e)
			}
		})
	}
}

// TestGoexitInWriteTxFailsItsAttemptSQLite: a handler that calls
// runtime.Goexit inside its SQLite WriteTx, after JobCompleteTx, fails its
// attempt like any Goexit: its writes and completion roll back, and the
// retry completes. The function ran on the store's writer, which the
// Goexit ended: every write of the store waited for ever, the client's
// with it.
func TestGoexitInWriteTxFailsItsAttemptSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := sqliteTxEnv(t, &idem.Config{Queues: queues(1), DisableMaintenance: true,
		Retry: idem.RetryPolicy{Delays: []time.Duration{10 * time.Millisecond}, Jitter: -1}})
	b, st := env.b, env.b.store
	if err := st.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE orders (job_id bigint, attempt int)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.workers.Handle("ship", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		err := st.WriteTx(ctx, func(txCtx context.Context, tx *sqlitestore.Tx) error {
			if _, err := tx.ExecContext(txCtx, "INSERT INTO orders VALUES (?, ?)", j.ID, j.Attempt); err != nil {
				return err
			}
			if err := idem.JobCompleteTx(ctx, tx, "shipped"); err != nil {
				return err
			}
			if j.Attempt == 1 {
				runtime.Goexit()
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return json.RawMessage(`"shipped"`), nil
	})
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship", Opts: &idem.EnqueueOpts{MaxAttempts: 2}})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	row := waitState(t, b, res.Job.ID, idem.StateCompleted)
	if row.Attempt != 2 {
		t.Fatalf("completed at attempt %d, want 2 (the first ended in Goexit)", row.Attempt)
	}
	attempts := orderAttempts(t, st)
	if len(attempts) != 1 || attempts[0] != 2 {
		t.Errorf("orders of attempts %v, want only attempt 2's (the first rolled back)", attempts)
	}
	atts, err := b.client.JobAttempts(ctx, "", res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[0].Outcome != idemtype.OutcomeFailed || !strings.Contains(atts[0].Error, "runtime.Goexit") {
		t.Errorf("attempts %+v, want a first one failed naming runtime.Goexit", atts)
	}
}
