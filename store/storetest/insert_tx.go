package storetest

import (
	"context"
	"errors"
	"testing"

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
