package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem"
)

// ChargeArgs are the args of the example's "charge" jobs.
type ChargeArgs struct {
	Cents int `json:"cents"`
}

// Kind implements idem.JobArgs.
func (ChargeArgs) Kind() string { return "charge" }

// A failure that no retry can fix goes straight to the dead-letter queue
// with JobPermanent; JobErrorCode tags it so the queue can be reviewed,
// filtered and requeued by cause.
func ExampleJobPermanent() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()

	workers := idem.NewWorkers()
	idem.AddWorker(workers, idem.WorkFunc[ChargeArgs](func(ctx context.Context, job *idem.Job[ChargeArgs]) (any, error) {
		return nil, idem.JobPermanent(idem.JobErrorCode("CARD_DECLINED", errors.New("card declined")))
	}))
	client, _ := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 1}}})
	res, _ := client.Enqueue(ctx, ChargeArgs{Cents: 500}, &idem.EnqueueOpts{MaxAttempts: 5})
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	job := exampleJobWait(ctx, client, res.Job.ID)
	fmt.Println(job.State, "after", job.Attempt, "of", job.MaxAttempts, "attempts:", job.ErrorCode)
	// Output:
	// dead after 1 of 5 attempts: CARD_DECLINED
}
