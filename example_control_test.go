package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem"
)

// exampleControlClient starts a client whose "control" jobs run h, and
// returns it with a stop function.
func exampleControlClient(ctx context.Context, h idem.HandlerFunc) (*idem.Client, func()) {
	st, closeStore := exampleStore(ctx)
	workers := idem.NewWorkers()
	workers.Handle("control", h)
	client, _ := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 1}}})
	_ = client.Start(ctx)
	return client, func() { _ = client.Stop(ctx); closeStore() }
}

// A handler returning JobSnooze puts its job back for a while; a snooze is
// not a failure.
func ExampleJobSnooze() {
	ctx := context.Background()
	calls := 0
	client, stop := exampleControlClient(ctx, func(ctx context.Context, job *idem.JobRow) (json.RawMessage, error) {
		calls++
		if calls == 1 {
			return nil, idem.JobSnooze(time.Millisecond) // e.g. the upstream is not ready yet
		}
		return json.RawMessage(`"ready"`), nil
	})
	defer stop()

	res, _ := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "control", Args: json.RawMessage(`{}`)})
	job := exampleJobWait(ctx, client, res.Job.ID)
	fmt.Println(job.State, string(job.Result), "calls:", calls)
	// Output: completed "ready" calls: 2
}

// JobRetryAfter fails an attempt and sets when the next one runs,
// overriding the backoff policy (e.g. from a Retry-After header).
func ExampleJobRetryAfter() {
	ctx := context.Background()
	calls := 0
	client, stop := exampleControlClient(ctx, func(ctx context.Context, job *idem.JobRow) (json.RawMessage, error) {
		calls++
		if calls == 1 {
			return nil, idem.JobRetryAfter(time.Millisecond, errors.New("429 too many requests"))
		}
		return json.RawMessage(`"sent"`), nil
	})
	defer stop()

	res, _ := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "control", Args: json.RawMessage(`{}`)})
	job := exampleJobWait(ctx, client, res.Job.ID)
	fmt.Println(job.State, string(job.Result), "attempts:", job.Attempt)
	// Output: completed "sent" attempts: 2
}

// JobCancel ends a job for good without retrying it: its state is
// cancelled, not dead.
func ExampleJobCancel() {
	ctx := context.Background()
	calls := 0
	client, stop := exampleControlClient(ctx, func(ctx context.Context, job *idem.JobRow) (json.RawMessage, error) {
		calls++
		return nil, idem.JobCancel(errors.New("account closed"))
	})
	defer stop()

	res, _ := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "control", Args: json.RawMessage(`{}`),
		Opts: &idem.EnqueueOpts{MaxAttempts: 5}})
	job := exampleJobWait(ctx, client, res.Job.ID)
	fmt.Println(job.State, "calls:", calls)
	// Output: cancelled calls: 1
}
