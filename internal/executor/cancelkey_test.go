package executor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestCancelledRunKeepsRetryKey: the key lease a cancelled attempt gives
// back (releaseCancelledKey) is its own claim's, not whatever its job's
// owner name holds. Job J (key X, a one-minute dedup window that has
// closed) is claimed (run 1) and cancelled; job K of key X, inserted then,
// takes X's record; J is retried and claimed again (run 2, another lease
// token, once run 1's lease ended) and run 2 takes X's lease, stored under
// J's owner name (the record names K). When run 1's handler then returns
// cancelled (late), its give-back must
// leave run 2's lease alone: before the fix it released it (same owner,
// job:J), and another acquirer of X (K's own run, a Do) took X while run 2
// ran.
func TestCancelledRunKeepsRetryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	job := func(queue string) *store.JobInsertParams {
		return &store.JobInsertParams{Tenant: "t", Queue: queue, Kind: "k", Args: []byte("{}"), MaxAttempts: 3,
			RunAt: now.Add(-time.Hour), ResultTTL: time.Hour, DedupWindow: time.Minute, IdempotencyKey: "key-c", Fingerprint: "fp"}
	}
	insert := func(p *store.JobInsertParams, at time.Time) *idemtype.JobRow {
		res, err := b.store.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}, Now: at})
		if err != nil || res[0].Err != nil || res[0].Existing {
			t.Fatalf("insert: %v %+v", err, res)
		}
		return res[0].Job
	}
	claim := func(at time.Time) *idemtype.JobRow {
		jobs, err := b.store.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 1,
			LeaseUntil: at.Add(time.Minute), Now: at})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		return jobs[0]
	}
	j := insert(job("q"), now.Add(-time.Hour))
	run1 := claim(now)
	if run1.ID != j.ID {
		t.Fatalf("claimed %d, want %d", run1.ID, j.ID)
	}
	if _, err := b.store.JobCancel(ctx, &store.JobCancelParams{ID: j.ID, Reason: "test", Now: now}); err != nil {
		t.Fatal(err)
	}
	k := insert(job("other"), now)
	if _, err := b.store.JobRetryMany(ctx, &store.JobRetryManyParams{IDs: []int64{j.ID}, Now: now}); err != nil {
		t.Fatal(err)
	}
	// The retry runs J again once run 1's lease ended (the cancel's hold:
	// run 1's handler may still run until then, and does here).
	run2 := claim(now.Add(time.Minute))
	if run2.ID != j.ID || run2.LeaseToken == run1.LeaseToken || run2.KeyHeld {
		t.Fatalf("run 2: job %d token %q held %v", run2.ID, run2.LeaseToken, run2.KeyHeld)
	}
	if r := b.exec.AcquireKeys(ctx, []*idemtype.JobRow{run2})[run2.ID]; r == nil || !r.Acquired {
		t.Fatalf("run 2 did not take the key: %+v", r)
	}
	probe, err := b.store.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "key-c", Owner: "do:probe",
		LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now})
	if err != nil || probe.Acquired {
		t.Fatalf("the key was free while run 2 holds it: %+v %v", probe, err)
	}
	// Run 1's handler returns, cancelled.
	b.handlers["k"] = func(context.Context, *idemtype.JobRow) (json.RawMessage, error) { return nil, nil }
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(idemtype.ErrJobCancelled)
	b.exec.Execute(cctx, run1, &store.RecordAcquireResult{Acquired: true})
	res, err := b.store.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "key-c", Owner: store.JobOwner(k.ID),
		JobID: k.ID, LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquired {
		t.Fatal("job K took the key while run 2 of job J holds it: the cancelled run 1 gave back run 2's lease")
	}
}

// TestLostLeaseOfCancelledJobGivesKeyBack: a job cancelled in another
// process (SQLite announces no cancel) is seen by its worker only as a lost
// lease (the heartbeater's ErrLeaseLost). When its key was taken after the
// cancel committed (the claim's key step racing the cancel), that key
// lease is stored under the job's owner and nobody else releases it: the
// attempt must give it back, else the key's next job waits for the lease
// to end. Before the fix only the cause ErrJobCancelled gave it back.
func TestLostLeaseOfCancelledJobGivesKeyBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	run := b.claim(t, "k", "key-lost")
	// The claim's key step takes the key (KeyHeld false: "not known", as
	// when the key's record named an earlier job).
	run.KeyHeld = false
	// Another process cancels the running job.
	if _, err := b.store.JobCancel(ctx, &store.JobCancelParams{ID: run.ID, Reason: "test", Now: now}); err != nil {
		t.Fatal(err)
	}
	// The key step runs after the cancel committed (acquire alone); the
	// handler then learns of the cancel only as a lost lease.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var ran bool
	b.handlers["k"] = func(hctx context.Context, _ *idemtype.JobRow) (json.RawMessage, error) {
		ran = true
		probe, err := b.store.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "key-lost", Owner: "do:probe",
			LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now})
		if err != nil || probe.Acquired {
			t.Errorf("the key was free while the handler ran: %+v %v", probe, err)
		}
		cancel(idemtype.ErrLeaseLost) // the heartbeater's renewal was refused
		<-hctx.Done()
		return nil, context.Cause(hctx)
	}
	b.exec.Execute(cctx, run, nil)
	if !ran {
		t.Fatal("the handler did not run")
	}
	res, err := b.store.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "t", Key: "key-lost", Owner: "job:next",
		LeaseUntil: now.Add(time.Minute), DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Acquired {
		t.Fatalf("the key's next job waits for the cancelled attempt's key lease to end: %+v", res)
	}
}
