package recipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/key"
)

// Seed 004, the scheduled-jobs standard: a run's lock key is
// function:tenant:date (day or hour grain, plus the entity hash when the run
// is per entity), so a run fires once per period however often the
// scheduler ticks; a failing run is retried after 1 s, 5 s and 25 s, then
// dead with its error code, listed by code and resolved (is_resolved).
// Here the run is enqueued by hand with its lock key, as the seed's own
// scheduler would; Example_scheduledFunctionsSchedules lets idem's
// scheduler fire it.
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

// Seed 004's scheduled functions as idem schedules: a daily build at 03:00
// (lock key at day grain) and an hourly price sync (hour grain), fired by
// the scheduler of the elected leader. Each firing is one job keyed
// "§{function}:{tenant}:{date}", so however often the scheduler passes —
// or however many processes run one — a period runs once. Failures retry
// after 1 s, 5 s and 25 s as above (Config.Retry).
func Example_scheduledFunctionsSchedules() {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 2, 6, 2, 59, 59, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	step := func(to time.Time) { mu.Lock(); now = to; mu.Unlock() }
	ran := make(chan *idem.JobRow, 8)
	workers := idem.NewWorkers()
	for _, kind := range []string{"cdp-build", "price-sync"} {
		workers.Handle(kind, func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
			ran <- j
			return nil, nil
		})
	}
	c, done := openWith(&idem.Config{Now: clock, Workers: workers, MaxAttempts: 4,
		Retry:  idem.RetryPolicy{Base: time.Second, Factor: 5, Jitter: -1},
		Queues: map[string]idem.QueueConfig{"scheduled": {}}, ScheduleInterval: 10 * time.Millisecond,
		Schedules: []idem.Schedule{
			{Name: "cdp-build", Tenant: "tenant-abc123", Cron: "0 3 * * *", Grain: key.GrainDay,
				Kind: "cdp-build", Queue: "scheduled"},
			{Name: "price-sync", Tenant: "tenant-abc123", Cron: "0 * * * *", Grain: key.GrainHour,
				Kind: "price-sync", Queue: "scheduled"},
		}})
	defer done()
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Stop(ctx)

	wait := func(n int) []string {
		var keys []string
		for range n {
			select {
			case j := <-ran:
				keys = append(keys, j.IdempotencyKey)
			case <-time.After(30 * time.Second):
				keys = append(keys, "(no firing)")
			}
		}
		sort.Strings(keys)
		return keys
	}
	step(time.Date(2026, 2, 6, 3, 0, 0, 0, time.UTC))
	fmt.Println("03:00 ran:", wait(2))
	step(time.Date(2026, 2, 6, 4, 0, 0, 0, time.UTC))
	fmt.Println("04:00 ran:", wait(1))
	for _, kind := range []string{"cdp-build", "price-sync"} {
		jobs, _, _ := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Tenant: "tenant-abc123", Kind: kind}})
		fmt.Printf("%s jobs: %d\n", kind, len(jobs))
	}
	// Output:
	// 03:00 ran: [§cdp-build:tenant-abc123:2026-02-06 §price-sync:tenant-abc123:2026-02-06T03]
	// 04:00 ran: [§price-sync:tenant-abc123:2026-02-06T04]
	// cdp-build jobs: 1
	// price-sync jobs: 2
}
