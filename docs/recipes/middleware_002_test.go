package recipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idem-dev/idem"
)

// Seed 002, the queue job middleware: every job of the "emails" queue gets
// the key {tenant}_{user}_{action}_{hash16} without the caller giving one
// (the user comes from the job's metadata); a failing job is retried 3
// times after 60 s, 120 s and 240 s (capped at 1 h), then lands in the
// dead-letter queue with its error code, where an operator resolves it and
// it leaves the unresolved count. (Throttling per tenant and queue lands
// with the flow-control work and is not shown here.)
func Example_queueMiddleware() {
	ctx := context.Background()
	clk := newClock()
	c, done := open(&idem.Config{Now: clk.Now,
		MaxAttempts:    4, // the first try and 3 retries
		RetryByQueue:   map[string]idem.RetryPolicy{"emails": {Base: 60 * time.Second, Factor: 2, Max: time.Hour, Jitter: -1}},
		AutoKeyByQueue: map[string]idem.AutoKey{"emails": {Action: "send_email"}},
	})
	defer done()

	send := idem.EnqueueParams{Kind: "send_email", Args: json.RawMessage(`{"to":"ada@example.com","template":"welcome"}`),
		Opts: &idem.EnqueueOpts{Tenant: "acme", Queue: "emails", Metadata: json.RawMessage(`{"user":"user-1"}`)}}
	first, _ := c.EnqueueRaw(ctx, send)
	again, _ := c.EnqueueRaw(ctx, send) // dispatched twice: one job
	fmt.Println("key:", first.Job.IdempotencyKey)
	fmt.Println("second dispatch existing:", again.Existing)

	for {
		clk.Add(time.Hour) // let the retry delay pass
		jobs, _ := c.Claim(ctx, idem.ClaimParams{Tenant: "acme", Queues: []string{"emails"}, WorkerID: "w"})
		if len(jobs) == 0 {
			break
		}
		j, _ := c.Fail(ctx, "acme", jobs[0].ID, jobs[0].LeaseToken, idem.FailParams{Error: "smtp timeout", ErrorCode: "SMTP_TIMEOUT"})
		if j.State == idem.StateRetryable {
			fmt.Printf("attempt %d failed: retry in %s\n", j.Attempt, j.RunAt.Sub(clk.Now()))
		} else {
			fmt.Printf("attempt %d failed: %s (%s)\n", j.Attempt, j.State, j.ErrorCode)
		}
	}
	rec, _ := c.RecordGet(ctx, "acme", first.Job.IdempotencyKey)
	fmt.Println("record status:", rec.Status)
	unresolved := func() int64 {
		stats, _ := c.QueueStats(ctx, "acme")
		return stats[0].DeadUnresolved
	}
	fmt.Println("unresolved dead letters:", unresolved())
	r, _ := c.DLQResolve(ctx, "acme", first.Job.ID, "mail server fixed, sent by hand")
	fmt.Println("resolved:", r.ResolvedAt != nil, "- unresolved dead letters:", unresolved())
	// Output:
	// key: acme_user-1_send_email_db7fe99dfa486c13
	// second dispatch existing: true
	// attempt 1 failed: retry in 1m0s
	// attempt 2 failed: retry in 2m0s
	// attempt 3 failed: retry in 4m0s
	// attempt 4 failed: dead (SMTP_TIMEOUT)
	// record status: failed
	// unresolved dead letters: 1
	// resolved: true - unresolved dead letters: 0
}
