package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// TestPullCancelBeforeKeyAcquireLeavesKeyFree: a keyed job cancelled while
// its pull claim takes its key (the claim's batched RecordAcquireMany, for
// a key the claim itself did not hold) is not handed out, and its key is
// free: the key's next job is handed out at the next claim. Before the fix
// the claim handed out the cancelled job, and the key lease its key step
// took after the cancel was held by nobody until the claim's lease ended
// (10 minutes here): the next job snoozed ("idempotency key held by
// job:N"). The pull analogue of TestCancelBeforeKeyAcquireLeavesKeyFree.
// Under a queue concurrency of 1 the claim also acknowledges the cancel
// (no handler will run), ending the cancelled job's hold on the slot: the
// next job is not held back for the cancelled claim's 10-minute lease.
func TestPullCancelBeforeKeyAcquireLeavesKeyFree(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, _ := openLeaseStore(t, kind)
			st, release := newKeyGate(raw)
			defer release() // on failure: let the acquire through
			c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), LeaseDuration: 10 * time.Minute, DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.LimitPut(ctx, idem.Limit{FlowScope: store.FlowScope{Queue: idem.DefaultQueue}, Concurrency: 1}); err != nil {
				t.Fatal(err)
			}
			var window time.Duration
			first, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{IdempotencyKey: "pk", DedupWindow: &window}})
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan []*idem.JobRow, 1)
			go func() {
				jobs, _ := c.Claim(ctx, idem.ClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "w", Lease: 10 * time.Minute})
				got <- jobs
			}()
			st.waitEntered(t)
			if _, err := c.JobCancel(ctx, "", first.Job.ID); err != nil {
				t.Fatal(err)
			}
			release()
			if jobs := <-got; len(jobs) != 0 {
				t.Fatalf("the claim handed out %d jobs, want none (its only job was cancelled)", len(jobs))
			}
			second, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"n":2}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "pk", DedupWindow: &window}})
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "w", Lease: 10 * time.Minute})
			if err != nil || len(jobs) != 1 || jobs[0].ID != second.Job.ID {
				row, _ := c.JobGet(ctx, "", second.Job.ID)
				t.Fatalf("second claim %v %v; second job %s: %s", jobs, err, row.State, row.LastError)
			}
		})
	}
}
