package idem_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem"
)

// A concurrency limit caps the jobs of a queue running at once on every
// node sharing the store; a paused queue hands out nothing until resumed.
// Both are kept in the store and enforced when jobs are claimed.
func ExampleClient_LimitPut() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()
	client, _ := idem.NewClient(st, nil)

	_, _ = client.LimitPut(ctx, idem.Limit{FlowScope: idem.FlowScope{Queue: "render"}, Concurrency: 2})
	for i := range 3 {
		_, _ = client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "frame",
			Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Opts: &idem.EnqueueOpts{Queue: "render"}})
	}
	claim := func() []*idem.JobRow {
		jobs, _ := client.Claim(ctx, idem.ClaimParams{Queues: []string{"render"}, WorkerID: "w", Limit: 10})
		return jobs
	}
	first := claim()
	fmt.Println("claimed under the limit:", len(first))
	_, _ = client.Complete(ctx, "", first[0].ID, first[0].LeaseToken, nil)

	_ = client.QueuePause(ctx, "render", "")
	fmt.Println("claimed while paused:", len(claim()))
	_ = client.QueueResume(ctx, "render", "")
	fmt.Println("claimed after resume:", len(claim()))

	limits, _ := client.LimitList(ctx, "")
	fmt.Println("running:", limits[0].Running, "of", limits[0].Concurrency)
	// Output:
	// claimed under the limit: 2
	// claimed while paused: 0
	// claimed after resume: 1
	// running: 2 of 2
}
