package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// bundle is an executor on a fresh SQLite store with a fixed clock.
type bundle struct {
	store    store.Store
	exec     *executor.Executor
	handlers map[string]executor.Handler
	hits     atomic.Int64
	misses   atomic.Int64
}

func setup(t *testing.T) *bundle {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bundle{store: st, handlers: map[string]executor.Handler{}}
	b.exec, err = executor.New(&executor.Config{
		Store: st, Now: func() time.Time { return now }, LeaseDuration: time.Minute, CompressThreshold: 64,
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(row *idemtype.JobRow) time.Duration { return time.Duration(row.Attempt) * time.Second },
		Handler:    func(kind string) executor.Handler { return b.handlers[kind] },
		CacheHits:  &b.hits, CacheMisses: &b.misses,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// claim inserts a job (keyed when key is not "") and claims it.
func (b *bundle) claim(t *testing.T, kind, key string) *idemtype.JobRow {
	t.Helper()
	ctx := context.Background()
	p := &store.JobInsertParams{Tenant: "t", Queue: "q", Kind: kind, Args: []byte("{}"), MaxAttempts: 3,
		RunAt: now, ResultTTL: time.Hour}
	if key != "" {
		p.IdempotencyKey, p.Fingerprint = key, "fp-"+kind
	}
	res, err := b.store.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}, Now: now})
	if err != nil || res[0].Err != nil {
		t.Fatalf("insert: %v %+v", err, res)
	}
	jobs, err := b.store.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1,
		LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(jobs) != 1 || jobs[0].ID != res[0].Job.ID {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	return jobs[0]
}

func (b *bundle) finish(t *testing.T, fin *store.JobFinishParams) {
	t.Helper()
	errs, err := b.store.JobFinishMany(context.Background(), []*store.JobFinishParams{fin})
	if err != nil || (len(errs) > 0 && errs[0] != nil) {
		t.Fatalf("finish: %v %v", err, errs)
	}
}

func TestSetOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row := &idemtype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 3}
	last := &idemtype.JobRow{ID: 2, Attempt: 3, MaxAttempts: 3}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		row     *idemtype.JobRow
		err     error
		state   idemtype.JobState
		outcome idemtype.Outcome
		runAt   time.Time
		snooze  bool
		errText string
	}{
		{"success completes", row, nil, idemtype.StateCompleted, idemtype.OutcomeCompleted, time.Time{}, false, ""},
		{"error retries with the policy's delay", row, boom, idemtype.StateRetryable, idemtype.OutcomeFailed, now.Add(time.Second), false, "boom"},
		{"error on the last attempt is dead", last, boom, idemtype.StateDead, idemtype.OutcomeDead, time.Time{}, false, "boom"},
		{"snooze schedules without an error", row, snooze(time.Minute), idemtype.StateScheduled, idemtype.OutcomeSnoozed, now.Add(time.Minute), true, ""},
		{"snooze on the last attempt still snoozes", last, snooze(time.Minute), idemtype.StateScheduled, idemtype.OutcomeSnoozed, now.Add(time.Minute), true, ""},
		{"cancel cancels", row, control(idemtype.ControlCancel, 0), idemtype.StateCancelled, idemtype.OutcomeCancelled, time.Time{}, false, "cancelled: boom"},
		{"permanent is dead at once", row, control(idemtype.ControlPermanent, 0), idemtype.StateDead, idemtype.OutcomeDead, time.Time{}, false, "permanent failure: boom"},
		{"retry after overrides the delay", row, control(idemtype.ControlRetryAfter, 42*time.Second), idemtype.StateRetryable, idemtype.OutcomeFailed, now.Add(42 * time.Second), false, "retry after 42s: boom"},
		{"retry after on the last attempt is dead", last, control(idemtype.ControlRetryAfter, time.Second), idemtype.StateDead, idemtype.OutcomeDead, time.Time{}, false, "retry after 1s: boom"},
		{"wrapped control errors count", row, wrap(control(idemtype.ControlPermanent, 0)), idemtype.StateDead, idemtype.OutcomeDead, time.Time{}, false, "job: permanent failure: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fin := &store.JobFinishParams{ID: tc.row.ID}
			b.exec.SetOutcome(fin, tc.row, []byte(`1`), tc.err)
			if fin.State != tc.state || fin.Outcome != tc.outcome || !fin.RunAt.Equal(tc.runAt) ||
				fin.Snooze != tc.snooze || fin.Error != tc.errText {
				t.Fatalf("got state=%s outcome=%s run_at=%s snooze=%v error=%q", fin.State, fin.Outcome, fin.RunAt, fin.Snooze, fin.Error)
			}
		})
	}

	t.Run("a keyed success carries the record's result", func(t *testing.T) {
		keyed := &idemtype.JobRow{ID: 3, Attempt: 1, MaxAttempts: 3, IdempotencyKey: "k"}
		fin := &store.JobFinishParams{}
		b.exec.SetOutcome(fin, keyed, nil, nil)
		if string(fin.RecordResult) != "null" || fin.ResultHash == "" || fin.RecordCompressed {
			t.Fatalf("record result %q hash %q", fin.RecordResult, fin.ResultHash)
		}
		big := []byte(`"` + strings.Repeat("a", 500) + `"`)
		fin = &store.JobFinishParams{}
		b.exec.SetOutcome(fin, keyed, big, nil)
		out, err := executor.DecodeResult(fin.RecordResult, fin.RecordCompressed)
		if !fin.RecordCompressed || err != nil || string(out) != string(big) || string(fin.Result) != string(big) {
			t.Fatalf("compressed %v err %v", fin.RecordCompressed, err)
		}
	})
}

func snooze(d time.Duration) error {
	return &idemtype.ControlError{Kind: idemtype.ControlSnooze, After: d}
}

func control(k idemtype.ControlKind, d time.Duration) error {
	return &idemtype.ControlError{Kind: k, After: d, Err: errors.New("boom")}
}

func wrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "job: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func TestExecute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("runs the handler with the job in its context", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.handlers["k"] = func(ctx context.Context, row *idemtype.JobRow) (json.RawMessage, error) {
			if _, got, ok := executor.JobFromContext(ctx); !ok || got.ID != row.ID {
				return nil, errors.New("job missing from the handler's context")
			}
			return json.RawMessage(`{"ok":1}`), nil
		}
		row := b.claim(t, "k", "")
		fin := b.exec.Execute(ctx, row, nil)
		if fin.State != idemtype.StateCompleted || string(fin.Result) != `{"ok":1}` || !fin.FinishedAt.Equal(now) {
			t.Fatalf("finish %+v", fin)
		}
		if _, _, ok := executor.JobFromContext(ctx); ok {
			t.Fatal("JobFromContext outside a handler")
		}
	})

	t.Run("a panic fails the attempt with its stack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.handlers["k"] = func(context.Context, *idemtype.JobRow) (json.RawMessage, error) { panic("kaboom") }
		fin := b.exec.Execute(ctx, b.claim(t, "k", ""), nil)
		if fin.State != idemtype.StateRetryable || !strings.Contains(fin.Error, "panic: kaboom") ||
			!strings.Contains(fin.Error, "executor_test.go") {
			t.Fatalf("finish %s %q", fin.State, fin.Error)
		}
	})

	t.Run("a kind without a handler fails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fin := b.exec.Execute(ctx, b.claim(t, "nobody", ""), nil)
		if fin.State != idemtype.StateRetryable || !strings.Contains(fin.Error, `no worker registered for kind "nobody"`) {
			t.Fatalf("finish %s %q", fin.State, fin.Error)
		}
	})

	t.Run("a completed key answers from the cache", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int32
		b.handlers["k"] = func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
			calls.Add(1)
			return json.RawMessage(`{"n":1}`), nil
		}
		first := b.claim(t, "k", "key-1")
		fin := b.exec.Execute(ctx, first, nil)
		b.finish(t, fin)
		second := b.claim(t, "k", "key-1") // dedup window 0: a new job once the first finished
		keys := b.exec.AcquireKeys(ctx, []*idemtype.JobRow{second})
		fin = b.exec.Execute(ctx, second, keys[second.ID])
		if calls.Load() != 1 || fin.Outcome != idemtype.OutcomeCached || !fin.WasCached ||
			fin.OriginalJobID != first.ID || string(fin.Result) != `{"n":1}` {
			t.Fatalf("calls %d finish %+v", calls.Load(), fin)
		}
		if b.hits.Load() != 1 || b.misses.Load() != 1 {
			t.Fatalf("hits %d misses %d", b.hits.Load(), b.misses.Load())
		}
	})

	t.Run("a key held by a live job snoozes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Taken before the job is claimed: once it runs, the job holds its
		// own record by its job lease.
		if res, err := b.store.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "held", Owner: "other",
			LeaseUntil: now.Add(2 * time.Second), DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now}); err != nil || !res.Acquired {
			t.Fatal(err, res)
		}
		row := b.claim(t, "k", "held")
		fin, run := b.exec.Settle(ctx, row, nil)
		if run || fin.Outcome != idemtype.OutcomeSnoozed || !fin.Snooze || !fin.RunAt.Equal(now.Add(2*time.Second)) ||
			!strings.Contains(fin.Error, "held by other") {
			t.Fatalf("run %v finish %+v", run, fin)
		}
	})

	t.Run("an unkeyed job needs no key", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		row := b.claim(t, "k", "")
		if keys := b.exec.AcquireKeys(ctx, []*idemtype.JobRow{row}); keys != nil {
			t.Fatalf("keys %v", keys)
		}
		if _, run := b.exec.Settle(ctx, row, nil); !run || b.misses.Load() != 0 {
			t.Fatalf("run %v misses %d", run, b.misses.Load())
		}
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := executor.New(&executor.Config{}); err == nil {
		t.Fatal("an empty config was accepted")
	}
	if _, err := executor.New(nil); err == nil {
		t.Fatal("a nil config was accepted")
	}
}

func TestResultCodec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		in         string
		threshold  int
		compressed bool
	}{
		{"small stays plain", `{"a":1}`, 64, false},
		{"never compress", strings.Repeat("x", 1000), -1, false},
		{"large compresses", strings.Repeat("x", 1000), 64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := executor.EncodeResult([]byte(tc.in), tc.threshold)
			if err != nil || e.Compressed != tc.compressed || len(e.Hash) != 64 {
				t.Fatalf("encode: %+v %v", e, err)
			}
			out, err := executor.DecodeResult(e.Bytes, e.Compressed)
			if err != nil || string(out) != tc.in {
				t.Fatalf("decode: %q %v", out, err)
			}
		})
	}
	if _, err := executor.DecodeResult([]byte("not gzip"), true); err == nil {
		t.Fatal("decoding garbage succeeded")
	}
}
