package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// A result-cache lease runs any piece of work once per key across
// processes: the first caller gets a lease and stores the result, every
// later caller gets the stored result without running the work.
func ExampleClient_LeaseAcquire() {
	ctx := context.Background()
	cl, stop := exampleServer()
	defer stop()

	report := func() string {
		l, err := cl.LeaseAcquire(ctx, "monthly-report-2026-11", time.Minute, 24*time.Hour)
		if err != nil {
			return err.Error()
		}
		if l.Cached {
			return "cached: " + string(l.Result)
		}
		result := json.RawMessage(`{"rows":1284}`) // the expensive work
		if _, err := cl.LeaseComplete(ctx, "monthly-report-2026-11", l.LeaseToken, result, 0); err != nil {
			return err.Error()
		}
		return "computed: " + string(result)
	}
	fmt.Println(report())
	fmt.Println(report())
	// Output:
	// computed: {"rows":1284}
	// cached: {"rows":1284}
}

// A pull worker that fails a job for good sends it to the dead-letter
// queue; DLQRequeue makes it available again with a fresh attempt budget.
func ExampleClient_DLQRequeue() {
	ctx := context.Background()
	cl, stop := exampleServer()
	defer stop()

	res, _ := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: "billing", Kind: "charge",
		Args: json.RawMessage(`{"cents":500}`)})
	jobs, _ := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"billing"}, WorkerID: "w1"})
	dead, _ := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken,
		&idemclient.FailRequest{Error: "card expired", NoRetry: true, ErrorCode: "CARD_EXPIRED"})
	fmt.Println(dead.State, dead.ErrorCode)

	page, _ := cl.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{ErrorCode: "CARD_EXPIRED"}})
	fmt.Println("dead with this code:", len(page.Jobs))
	n, _ := cl.DLQRequeue(ctx, []string{res.Job.ID}, nil)
	job, _ := cl.GetJob(ctx, res.Job.ID)
	fmt.Println("requeued:", n, job.State, "attempt", job.Attempt)
	// Output:
	// dead CARD_EXPIRED
	// dead with this code: 1
	// requeued: 1 available attempt 0
}

// In a batch each item succeeds or fails alone; a repeated item (same key,
// same fields) returns the existing job.
func ExampleClient_EnqueueBatch() {
	ctx := context.Background()
	cl, stop := exampleServer()
	defer stop()

	items := []*idemclient.EnqueueRequest{
		{Kind: "email", Args: json.RawMessage(`{"to":"ada@example.com"}`), IdempotencyKey: "welcome-ada"},
		{Kind: "email", Args: json.RawMessage(`{"to":"bob@example.com"}`), MaxAttempts: -1},
		{Kind: "email", Args: json.RawMessage(`{"to":"ada@example.com"}`), IdempotencyKey: "welcome-ada"},
	}
	results, _ := cl.EnqueueBatch(ctx, items)
	for i, r := range results {
		switch {
		case r.Error != nil:
			fmt.Println(i, "refused:", errors.Is(r.Error, idem.ErrInvalid))
		default:
			fmt.Println(i, r.Job.State, "existing:", r.Existing)
		}
	}
	// Output:
	// 0 available existing: false
	// 1 refused: true
	// 2 available existing: true
}

// A schedule fires its job on a cron or an interval on whichever node
// leads; TriggerSchedule fires it now, once per key.
func ExampleClient_PutSchedule() {
	ctx := context.Background()
	cl, stop := exampleServer()
	defer stop()

	s, _ := cl.PutSchedule(ctx, "nightly-report", &idemclient.ScheduleRequest{
		Cron: "0 3 * * *", Timezone: "Europe/Paris", Queue: "reports", Kind: "report"})
	fmt.Println(s.Name, s.Cron, s.Timezone, s.NextFireAt != nil)

	first, _ := cl.TriggerSchedule(ctx, "nightly-report", "rerun-after-fix")
	again, _ := cl.TriggerSchedule(ctx, "nightly-report", "rerun-after-fix")
	fmt.Println(first.Job.Kind, first.Job.Queue, "same job:", again.Job.ID == first.Job.ID)
	// Output:
	// nightly-report 0 3 * * * Europe/Paris true
	// report reports same job: true
}

// AllJobs pages through a list for the loop: here 5 jobs come in pages of
// 2, newest first.
func ExampleClient_AllJobs() {
	ctx := context.Background()
	cl, stop := exampleServer()
	defer stop()

	for i := range 5 {
		_, _ = cl.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: "reports", Kind: "render",
			Args: json.RawMessage(fmt.Sprintf(`{"page":%d}`, i))})
	}
	for job, err := range cl.AllJobs(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Queue: "reports"}, Limit: 2}) {
		if err != nil {
			fmt.Println("list:", err)
			break
		}
		fmt.Println(string(job.Args))
	}
	// Output:
	// {"page":4}
	// {"page":3}
	// {"page":2}
	// {"page":1}
	// {"page":0}
}
