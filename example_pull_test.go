package idem_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem"
)

// A pull worker claims a job with a lease token and completes it with the
// token; the runtime of the client is not started: the caller is the worker.
func ExampleClient_Claim() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()
	client, _ := idem.NewClient(st, nil)

	res, _ := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "resize",
		Args: json.RawMessage(`{"image":"cat.png"}`), Opts: &idem.EnqueueOpts{Queue: "remote"}})
	jobs, _ := client.Claim(ctx, idem.ClaimParams{Queues: []string{"remote"}, WorkerID: "gpu-1"})
	job := jobs[0]
	fmt.Println(job.ID == res.Job.ID, job.State, job.Kind, string(job.Args))

	done, _ := client.Complete(ctx, "", job.ID, job.LeaseToken, json.RawMessage(`{"width":64}`))
	fmt.Println(done.State, string(done.Result))
	// Output:
	// true running resize {"image":"cat.png"}
	// completed {"width":64}
}
