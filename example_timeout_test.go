package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem"
)

// SlowArgs are the args of the example's "slow" jobs.
type SlowArgs struct{}

// Kind implements idem.JobArgs.
func (SlowArgs) Kind() string { return "slow" }

// A job's Timeout bounds each attempt: at the deadline the handler's
// context ends with the cause idem.ErrJobTimeout and the attempt fails
// (and is retried like any failure, here not: one attempt).
func ExampleEnqueueOpts_timeout() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()

	workers := idem.NewWorkers()
	idem.AddWorker(workers, idem.WorkFunc[SlowArgs](func(ctx context.Context, job *idem.Job[SlowArgs]) (any, error) {
		<-ctx.Done() // a call that honours its context, cut short
		fmt.Println("cause is ErrJobTimeout:", errors.Is(context.Cause(ctx), idem.ErrJobTimeout))
		return nil, ctx.Err()
	}))
	client, _ := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 1}}})
	res, _ := client.Enqueue(ctx, SlowArgs{}, &idem.EnqueueOpts{Timeout: 50 * time.Millisecond, MaxAttempts: 1})
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	job := exampleJobWait(ctx, client, res.Job.ID)
	fmt.Println(job.State, job.Timeout)
	// Output:
	// cause is ErrJobTimeout: true
	// dead 50ms
}
