package recipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/key"
)

// Seed 004, the scheduled-jobs standard: a run's lock key is
// function:tenant:date (day or hour grain, plus the entity hash when the run
// is per entity), so a run fires once per period however often the
// scheduler ticks; a failing run is retried after 1 s, 5 s and 25 s, then
// dead with its error code, listed by code and resolved (is_resolved).
// (Cron schedules land with the schedules work; here the run is enqueued by
// hand with its lock key.)
func Example_scheduledFunctions() {
	ctx := context.Background()
	clk := newClock()
	c, done := open(&idem.Config{Now: clk.Now, MaxAttempts: 4,
		Retry: idem.RetryPolicy{Base: time.Second, Factor: 5, Jitter: -1}})
	defer done()

	day, _ := key.Lock("cdp-build", "tenant-abc123", clk.Now(), nil, key.GrainDay, nil)
	hour, _ := key.Lock("price-sync", "tenant-abc123", clk.Now(), nil, key.GrainHour, []byte(`{"sku":"A-1","store":"s9"}`))
	fmt.Println("day lock: ", day)
	fmt.Println("hour lock:", hour)

	run := idem.EnqueueParams{Kind: "cdp-build", Args: json.RawMessage(`{}`),
		Opts: &idem.EnqueueOpts{Queue: "scheduled", IdempotencyKey: day}}
	first, _ := c.EnqueueRaw(ctx, run)
	clk.Add(5 * time.Minute) // the scheduler ticks again the same day
	again, _ := c.EnqueueRaw(ctx, run)
	fmt.Println("second tick: existing", again.Existing, "same run", again.Job.ID == first.Job.ID)

	for range 10 { // bounded: four attempts are expected
		j := work(ctx, c, "scheduled")
		if j == nil {
			clk.Add(time.Minute)
			continue
		}
		f, _ := c.Fail(ctx, "", j.ID, j.LeaseToken, idem.FailParams{Error: "warehouse unreachable", ErrorCode: "WAREHOUSE_DOWN"})
		if f.State != idem.StateRetryable {
			fmt.Printf("attempt %d: %s with error_code %s\n", f.Attempt, f.State, f.ErrorCode)
			break
		}
		fmt.Printf("attempt %d: retry in %s\n", f.Attempt, f.RunAt.Sub(clk.Now()))
		clk.Add(f.RunAt.Sub(clk.Now()))
	}
	dead, _, _ := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{States: []idem.JobState{idem.StateDead},
		ErrorCode: "WAREHOUSE_DOWN"}})
	fmt.Println("dead with WAREHOUSE_DOWN:", len(dead))
	r, _ := c.DLQResolve(ctx, "", dead[0].ID, "warehouse back; next run covers the day")
	fmt.Println("is_resolved:", r.ResolvedAt != nil)
	// Output:
	// day lock:  cdp-build:tenant-abc123:2026-02-06
	// hour lock: price-sync:tenant-abc123:2026-02-06T09:b14a1196eb3f
	// second tick: existing true same run true
	// attempt 1: retry in 1s
	// attempt 2: retry in 5s
	// attempt 3: retry in 25s
	// attempt 4: dead with error_code WAREHOUSE_DOWN
	// dead with WAREHOUSE_DOWN: 1
	// is_resolved: true
}
