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
// it leaves the unresolved count.
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

// Seed 002's throttling: at most 100 jobs a minute per tenant and 1,000 a
// minute per queue, decided at claim time in the store (so every worker
// process obeys it together). A throttled job stays available, uses no
// attempt, and starts when the next minute's budget allows.
func Example_queueMiddlewareThrottling() {
	ctx := context.Background()
	clk := newClock() // 09:00:00, the start of a one-minute window
	c, done := open(&idem.Config{Now: clk.Now})
	defer done()
	for _, l := range []idem.Limit{
		{FlowScope: idem.FlowScope{Tenant: "acme"}, Rate: 100, Period: time.Minute},
		{FlowScope: idem.FlowScope{Queue: "emails"}, Rate: 1000, Period: time.Minute},
	} {
		if _, err := c.LimitPut(ctx, l); err != nil {
			panic(err)
		}
	}
	// A burst of 150 emails from one tenant.
	burst := make([]idem.EnqueueParams, 150)
	for i := range burst {
		burst[i] = idem.EnqueueParams{Kind: "send_email", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Opts: &idem.EnqueueOpts{Tenant: "acme", Queue: "emails"}}
	}
	if _, err := c.EnqueueMany(ctx, burst); err != nil {
		panic(err)
	}
	started := func() int {
		n := 0
		for {
			jobs, err := c.Claim(ctx, idem.ClaimParams{Tenant: "acme", Queues: []string{"emails"}, WorkerID: "w", Limit: 50})
			if err != nil {
				panic(err)
			}
			if len(jobs) == 0 {
				return n
			}
			for _, j := range jobs {
				if _, err := c.Complete(ctx, "acme", j.ID, j.LeaseToken, nil); err != nil {
					panic(err)
				}
			}
			n += len(jobs)
		}
	}
	fmt.Println("09:00 started:", started(), "- the rest wait for the next minute")
	limits, _ := c.LimitList(ctx, "")
	for _, l := range limits {
		scope := "tenant " + l.Tenant
		if l.Tenant == "" {
			scope = "queue " + l.Queue
		}
		fmt.Printf("  %s: %d of %d this minute\n", scope, l.WindowUsed, l.Rate)
	}
	clk.Add(time.Minute)
	fmt.Println("09:01 started:", started())
	// Output:
	// 09:00 started: 100 - the rest wait for the next minute
	//   queue emails: 100 of 1000 this minute
	//   tenant acme: 100 of 100 this minute
	// 09:01 started: 50
}
