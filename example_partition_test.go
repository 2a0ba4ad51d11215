package idem_test

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem"
)

// StepArgs are the args of the examples' "step" jobs.
type StepArgs struct {
	Account string `json:"account"`
	N       int    `json:"n"`
}

// Kind implements idem.JobArgs.
func (StepArgs) Kind() string { return "step" }

// Jobs with the same PartitionKey run one at a time in the order they were
// enqueued, while other partitions run beside them.
func ExampleEnqueueOpts_partitionKey() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()

	ran := make(chan StepArgs)
	workers := idem.NewWorkers()
	idem.AddWorker(workers, idem.WorkFunc[StepArgs](func(ctx context.Context, job *idem.Job[StepArgs]) (any, error) {
		ran <- job.Args
		return nil, nil
	}))
	client, _ := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 4}}})

	for n := 1; n <= 3; n++ {
		for _, acct := range []string{"acct-1", "acct-2"} {
			_, _ = client.Enqueue(ctx, StepArgs{Account: acct, N: n}, &idem.EnqueueOpts{PartitionKey: acct})
		}
	}
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	// The two partitions interleave in any way; each one keeps its order.
	order := map[string][]int{}
	for range 6 {
		s := <-ran
		order[s.Account] = append(order[s.Account], s.N)
	}
	fmt.Println("acct-1:", order["acct-1"])
	fmt.Println("acct-2:", order["acct-2"])
	// Output:
	// acct-1: [1 2 3]
	// acct-2: [1 2 3]
}
