package recipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idem-dev/idem"
)

// Seed 003, the durable geo-event queue: events of one geofence are
// delivered in order (a partition per geofence, FIFO), an event id
// deduplicates for one hour, a failing delivery is tried 5 times with
// delays from 5 s doubling (5, 10, 20, 40 s), then dead; events can be
// replayed by geofence.
func Example_geoEventQueue() {
	ctx := context.Background()
	clk := newClock()
	hour := time.Hour
	c, done := open(&idem.Config{Now: clk.Now, MaxAttempts: 5, DedupWindow: hour,
		Retry: idem.RetryPolicy{Base: 5 * time.Second, Factor: 2, Jitter: -1}})
	defer done()

	event := func(id, fence, typ string) idem.EnqueueParams {
		return idem.EnqueueParams{Kind: "geo_event", Args: json.RawMessage(`{"type":"` + typ + `"}`),
			Opts: &idem.EnqueueOpts{Queue: "geo", PartitionKey: fence, IdempotencyKey: id}}
	}
	c.EnqueueRaw(ctx, event("evt-1", "fence-A", "enter"))
	c.EnqueueRaw(ctx, event("evt-2", "fence-A", "exit"))
	c.EnqueueRaw(ctx, event("evt-3", "fence-B", "enter"))
	clk.Add(30 * time.Minute)
	dup, _ := c.EnqueueRaw(ctx, event("evt-1", "fence-A", "enter"))
	fmt.Println("evt-1 again after 30 min: existing", dup.Existing)

	jobs, _ := c.Claim(ctx, idem.ClaimParams{Queues: []string{"geo"}, WorkerID: "w", Limit: 10})
	for _, j := range jobs {
		fmt.Println("claimed", j.IdempotencyKey, "of", j.PartitionKey)
	}
	c.Complete(ctx, "", jobs[1].ID, jobs[1].LeaseToken, nil) // fence B delivered
	head := jobs[0]                                          // evt-1 keeps failing; evt-2 waits behind it
	// Bounded: five attempts are expected.
	for range 10 {
		j, _ := c.Fail(ctx, "", head.ID, head.LeaseToken, idem.FailParams{Error: "push target down"})
		if j.State != idem.StateRetryable {
			fmt.Printf("attempt %d: %s\n", j.Attempt, j.State)
			break
		}
		fmt.Printf("attempt %d: retry in %s\n", j.Attempt, j.RunAt.Sub(clk.Now()))
		clk.Add(j.RunAt.Sub(clk.Now()))
		next, _ := c.Claim(ctx, idem.ClaimParams{Queues: []string{"geo"}, WorkerID: "w", Limit: 10})
		head = next[0]
		if len(next) != 1 || head.ID != j.ID {
			fmt.Println("evt-2 overtook evt-1")
		}
	}
	next := work(ctx, c, "geo")
	fmt.Println("then claimed", next.IdempotencyKey)

	n, _ := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Queue: "geo", PartitionKey: "fence-A",
		States: []idem.JobState{idem.StateDead}}})
	fmt.Println("replayed from fence-A:", n)
	// Output:
	// evt-1 again after 30 min: existing true
	// claimed evt-1 of fence-A
	// claimed evt-3 of fence-B
	// attempt 1: retry in 5s
	// attempt 2: retry in 10s
	// attempt 3: retry in 20s
	// attempt 4: retry in 40s
	// attempt 5: dead
	// then claimed evt-2
	// replayed from fence-A: 1
}
