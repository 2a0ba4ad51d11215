package idem_test

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem"
)

// A job with DependsOn runs only after every job it names has completed.
func ExampleEnqueueOpts_dependsOn() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()

	ran := make(chan string)
	workers := idem.NewWorkers()
	idem.AddWorker(workers, idem.WorkFunc[StepArgs](func(ctx context.Context, job *idem.Job[StepArgs]) (any, error) {
		ran <- fmt.Sprintf("%s #%d", job.Args.Account, job.Args.N)
		return job.Args.N, nil
	}))
	client, _ := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 4}}})

	open, _ := client.Enqueue(ctx, StepArgs{Account: "open account", N: 1}, nil)
	fund, _ := client.Enqueue(ctx, StepArgs{Account: "fund account", N: 2},
		&idem.EnqueueOpts{DependsOn: []int64{open.Job.ID}})
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	fmt.Println(<-ran)
	fmt.Println(<-ran)
	job := exampleJobWait(ctx, client, fund.Job.ID)
	fmt.Println(job.State, string(job.Result))
	// Output:
	// open account #1
	// fund account #2
	// completed 2
}
