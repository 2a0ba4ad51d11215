package idem_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem"
)

// A job that fails its last attempt is dead (the DLQ); DLQRequeue makes it
// available again with a fresh attempt budget.
func ExampleClient_DLQRequeue() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()
	client, _ := idem.NewClient(st, nil)

	res, _ := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "charge", Args: json.RawMessage(`{"cents":500}`),
		Opts: &idem.EnqueueOpts{Queue: "billing", MaxAttempts: 1}})
	jobs, _ := client.Claim(ctx, idem.ClaimParams{Queues: []string{"billing"}, WorkerID: "w"})
	dead, _ := client.Fail(ctx, "", jobs[0].ID, jobs[0].LeaseToken, idem.FailParams{Error: "card declined"})
	fmt.Println(dead.State, dead.LastError)

	n, _ := client.DLQRequeue(ctx, []int64{res.Job.ID}, idem.JobFilter{})
	job, _ := client.JobGet(ctx, "", res.Job.ID)
	fmt.Println("requeued:", n, "state:", job.State)
	// Output:
	// dead card declined
	// requeued: 1 state: available
}
