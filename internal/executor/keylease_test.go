package executor_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/store"
)

// TestKeyLeaseFollowsTheJobLease: the execution lease of a keyed job's
// idempotency key runs to the job's own lease expiry (the claim's, renewed
// with it by the heartbeater), not to now + LeaseDuration. The claim here
// leases for 7 minutes, the executor's LeaseDuration is 1. (Kills
// `row.LeaseExpiresAt != nil` negated in keyParams.)
func TestKeyLeaseFollowsTheJobLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	p := &store.JobInsertParams{Tenant: "t", Queue: "q", Kind: "k", Args: []byte("{}"), MaxAttempts: 3,
		RunAt: now, ResultTTL: time.Hour, IdempotencyKey: "key-1", Fingerprint: "fp"}
	if res, err := b.store.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}, Now: now}); err != nil || res[0].Err != nil {
		t.Fatalf("insert: %v %+v", err, res)
	}
	leaseUntil := now.Add(7 * time.Minute)
	jobs, err := b.store.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1,
		LeaseUntil: leaseUntil, Now: now})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	keys := b.exec.AcquireKeys(ctx, jobs)
	r := keys[jobs[0].ID]
	if r == nil || !r.Acquired {
		t.Fatalf("key not acquired: %+v", r)
	}
	rec, err := b.store.RecordGet(ctx, &store.RecordGetParams{Tenant: "t", Key: "key-1", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != idemtype.RecordInProgress || rec.LeaseUntil == nil || !rec.LeaseUntil.Equal(leaseUntil) {
		t.Fatalf("record %s, lease until %v; want in progress until the job's lease %v", rec.Status, rec.LeaseUntil, leaseUntil)
	}
}

// TestKeyBatchFailureLeavesEachJobAlone: when the batch acquire of a
// claim's keys fails (here the store is closed), AcquireKeys answers no
// lease for any job — each then acquires its key alone when it runs —
// rather than reading results that do not exist, and warns on the
// configured Logger. (Kills `err != nil` negated after RecordAcquireMany,
// and `Logger == nil` negated in New, which replaced a configured logger
// by the default.)
func TestKeyBatchFailureLeavesEachJobAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	exec, err := executor.New(&executor.Config{
		Store: b.store, Now: func() time.Time { return now }, LeaseDuration: time.Minute,
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(*idemtype.JobRow) time.Duration { return time.Second },
		Handler:    func(string) executor.Handler { return nil },
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	row := b.claim(t, "k", "key-2")
	row.KeyHeld = false // as a claim that did not read the record answers
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	if keys := exec.AcquireKeys(context.Background(), []*idemtype.JobRow{row}); keys[row.ID] != nil {
		t.Fatalf("a failed batch acquire answered %+v for job %d", keys[row.ID], row.ID)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "acquire idempotency keys failed") {
		t.Fatalf("configured logger got %q, want the failed acquire's warning", logs.String())
	}
}

// TestKeyHeldSkipsTheStore: a job its claim returned with KeyHeld (its
// key's record is its own) is answered acquired without asking the store
// (closed here: any store call would fail), and Settle runs its handler.
func TestKeyHeldSkipsTheStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row := b.claim(t, "k", "key-held")
	if !row.KeyHeld {
		t.Fatalf("the claim of a fresh key's job did not report it held: %+v", row)
	}
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	keys := b.exec.AcquireKeys(context.Background(), []*idemtype.JobRow{row})
	if r := keys[row.ID]; r == nil || !r.Acquired {
		t.Fatalf("held key answered %+v, want acquired", r)
	}
	if _, run := b.exec.Settle(context.Background(), row, keys[row.ID]); !run {
		t.Fatal("Settle did not run the handler of a job holding its key")
	}
}

// TestKeyStoreErrorSnoozes: a keyed job whose key cannot be acquired because
// of a store error (here the store is closed) snoozes without using an
// attempt, and its handler does not run: the failure is the
// infrastructure's, not the job's. Before the fix it failed the attempt (and
// died on its last one though its handler never ran).
func TestKeyStoreErrorSnoozes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row := b.claim(t, "k", "key-3")
	row.KeyHeld = false // as a claim that did not read the record answers
	row.Attempt = row.MaxAttempts
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	fin, run := b.exec.Settle(context.Background(), row, nil)
	if run || fin.State != idemtype.StateScheduled || fin.Outcome != idemtype.OutcomeSnoozed || !fin.Snooze ||
		!fin.RunAt.After(now) || !strings.Contains(fin.Error, "acquire key") {
		t.Fatalf("run %v, finish %s/%s snooze %v at %v (%q); want a snooze without an attempt, after now, naming the error",
			run, fin.State, fin.Outcome, fin.Snooze, fin.RunAt, fin.Error)
	}
}
