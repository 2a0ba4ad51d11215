package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// FailKind is the kind whose job row the backend's test makes the database
// refuse (a trigger of its own) for InsertTxAtomic.
const FailKind = "storetest_refused"

// InsertTxAtomic checks that a JobInsertManyTx failing part-way through a
// batch (the database refuses the job of FailKind, last of the batch, after
// a plain and a keyed job were written) leaves nothing of the batch in the
// caller's transaction, even when the caller ignores the error and commits:
// no job, no key held. insertThenCommit runs one insert in a fresh caller's
// transaction, then commits it whatever the insert returned, and reports
// both errors (a backend whose failed statement aborts the transaction
// refuses the commit). The backend's test installs the refusal of FailKind
// on s before calling it.
func InsertTxAtomic(t *testing.T, s store.Store, insertThenCommit func(ctx context.Context, p *store.JobInsertManyParams) (insertErr, commitErr error)) {
	t.Helper()
	ctx := t.Context()
	// A nil or empty batch is a no-op, as for JobInsertMany.
	for _, p := range []*store.JobInsertManyParams{nil, {Now: base}} {
		if insertErr, commitErr := insertThenCommit(ctx, p); insertErr != nil || commitErr != nil {
			t.Errorf("JobInsertManyTx of %+v: insert %v, commit %v; want a no-op", p, insertErr, commitErr)
		}
	}
	batch := []*store.JobInsertParams{newJob("tx_plain"), keyed("tx_keyed", "tx-key", "a"), newJob(FailKind)}
	insertErr, _ := insertThenCommit(ctx, &store.JobInsertManyParams{Jobs: batch, Now: base})
	if insertErr == nil {
		t.Fatal("JobInsertManyTx of a batch whose last job the database refuses: no error")
	}
	jobs, _, err := s.JobList(ctx, &store.JobListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		t.Errorf("job %d (%s) of the failed batch is stored after the caller's commit", j.ID, j.Kind)
	}
	// The key is free: a new insert with another fingerprint creates a job
	// rather than meeting a record of the failed batch.
	res := insertAll(t, s, base, keyed("tx_keyed", "tx-key", "b"))
	if res[0].Err != nil || res[0].Existing {
		t.Errorf("key of the failed batch still held: %+v", res[0])
	}
	// A job of the reserved tenant EveryTenant is refused before anything
	// is stored, as by JobInsertMany (CheckInsertTenants).
	every := newJob("tx_every")
	every.Tenant = store.EveryTenant
	insertErr, _ = insertThenCommit(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{newJob("tx_before"), every}, Now: base})
	if !errors.Is(insertErr, idemtype.ErrInvalid) {
		t.Errorf("JobInsertManyTx with tenant %q: %v, want ErrInvalid", store.EveryTenant, insertErr)
	}
	// A batch that succeeds in the caller's transaction commits whole.
	insertErr, commitErr := insertThenCommit(ctx, &store.JobInsertManyParams{Jobs: batch[:2:2], Now: base})
	if insertErr != nil || commitErr != nil {
		t.Fatalf("a good batch: insert %v, commit %v", insertErr, commitErr)
	}
	jobs, _, err = s.JobList(ctx, &store.JobListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, j := range jobs {
		kinds[j.Kind]++
	}
	if kinds["tx_plain"] != 1 || kinds["tx_before"] != 0 || kinds["tx_every"] != 0 {
		t.Errorf("jobs by kind %v, want one tx_plain of the good batch and none of the refused ones", kinds)
	}
}

// FinishFailKind is the kind of job the backend's test makes the database
// refuse to release from pending (a trigger of its own), for
// FinishTxAtomic.
const FinishFailKind = "storetest_refused_release"

// FinishTxAtomic checks that a JobFinishManyTx failing part-way (the
// completion of a job whose dependant, of FinishFailKind, the database
// refuses to release after the job's own row was written) leaves nothing
// of the finish in the caller's transaction, even when the caller ignores
// the error and commits: the job still runs under its lease, without a
// result, and its dependant is still pending. finishThenCommit runs one
// finish in a fresh caller's transaction, then commits it whatever the
// finish returned, and reports both errors (a backend whose failed
// statement aborts the transaction refuses the commit). The backend's test
// installs the refusal of FinishFailKind on s before calling it.
func FinishTxAtomic(t *testing.T, s store.Store, finishThenCommit func(ctx context.Context, p []*store.JobFinishParams) (finishErr, commitErr error)) {
	t.Helper()
	ctx := t.Context()
	if finishErr, commitErr := finishThenCommit(ctx, nil); finishErr != nil || commitErr != nil {
		t.Errorf("JobFinishManyTx of no finishes: finish %v, commit %v; want a no-op", finishErr, commitErr)
	}
	parent := insert1(t, s, base, newJob("tx_parent"))
	dep := newJob(FinishFailKind)
	dep.DependsOn = []int64{parent.ID}
	child := insert1(t, s, base, dep)
	running := claimJob(t, s, parent, base)
	finishErr, _ := finishThenCommit(ctx, []*store.JobFinishParams{completion(running, `"done"`, at(time.Second))})
	if finishErr == nil {
		t.Fatal("JobFinishManyTx of a completion whose dependant the database refuses to release: no error")
	}
	if got := mustGet(t, s, parent.ID); got.State != idemtype.StateRunning || got.Result != nil {
		t.Errorf("job after its failed completion was committed by the caller: %s with result %s, want running without one",
			got.State, got.Result)
	}
	wantState(t, s, child.ID, idemtype.StatePending)
	// The lease still holds: a finish that succeeds commits whole.
	fail := failure(running, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(time.Minute), at(time.Second))
	finishErr, commitErr := finishThenCommit(ctx, []*store.JobFinishParams{fail})
	if finishErr != nil || commitErr != nil {
		t.Fatalf("a good finish: finish %v, commit %v", finishErr, commitErr)
	}
	wantState(t, s, parent.ID, idemtype.StateRetryable)
	wantState(t, s, child.ID, idemtype.StatePending)
}
