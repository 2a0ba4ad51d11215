package idem_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem"
)

// A batch is a group of jobs created once per key, in one transaction: a
// repeated BatchCreate (a retried upload, a second click) returns the same
// batch. Its counts follow its jobs; BatchCancel stops what has not run.
func ExampleClient_BatchCreate() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()
	client, _ := idem.NewClient(st, nil)

	params := idem.BatchCreateParams{Key: "import-2026-11-26", Jobs: []idem.EnqueueParams{
		{Kind: "row", Args: json.RawMessage(`{"line":1}`), Opts: &idem.EnqueueOpts{Queue: "import"}},
		{Kind: "row", Args: json.RawMessage(`{"line":2}`), Opts: &idem.EnqueueOpts{Queue: "import"}},
		{Kind: "row", Args: json.RawMessage(`{"line":3}`), Opts: &idem.EnqueueOpts{Queue: "import"}},
	}}
	b, _ := client.BatchCreate(ctx, params)
	again, _ := client.BatchCreate(ctx, params)
	fmt.Println("jobs:", b.Total, "same batch:", again.ID == b.ID, "existing:", again.Existing)

	jobs, _ := client.Claim(ctx, idem.ClaimParams{Queues: []string{"import"}, WorkerID: "w"})
	_, _ = client.Complete(ctx, "", jobs[0].ID, jobs[0].LeaseToken, nil)

	b, _ = client.BatchCancel(ctx, "", b.ID)
	fmt.Println("completed:", b.Counts[idem.StateCompleted], "cancelled:", b.Counts[idem.StateCancelled], "finished:", b.Finished)
	// Output:
	// jobs: 3 same batch: true existing: true
	// completed: 1 cancelled: 2 finished: true
}
