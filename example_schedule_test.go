package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// A schedule enqueues one job per firing, keyed "{schedule}:{tenant}:{grain
// date}" in the schedule's zone, so no number of schedulers, restarts or
// clock steps can make a second job for a firing. The clock here is
// injected: it stands at 02:59:59 in Berlin, then moves to 03:00.
func ExampleClient_SchedulePut() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idem-example-")
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()

	var mu sync.Mutex
	now := time.Date(2026, 11, 26, 1, 59, 59, 0, time.UTC) // 02:59:59 in Berlin
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ran := make(chan *idem.JobRow, 1)
	workers := idem.NewWorkers()
	workers.Handle("cdp-build", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
		ran <- j
		return nil, nil
	})
	client, _ := idem.NewClient(st, &idem.Config{Now: clock, Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {}}, ScheduleInterval: 10 * time.Millisecond,
		Schedules: []idem.Schedule{{Name: "cdp-build", Cron: "0 3 * * *", Timezone: "Europe/Berlin",
			Grain: key.GrainDay, Kind: "cdp-build", Args: json.RawMessage(`{"full":true}`)}}})
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	info, _ := client.ScheduleGet(ctx, "", "cdp-build")
	fmt.Println("next:", info.NextFireAt.In(time.UTC).Format(time.RFC3339))

	mu.Lock()
	now = now.Add(time.Second) // 03:00 in Berlin: the firing is due
	mu.Unlock()
	select {
	case j := <-ran:
		fmt.Println("ran:", j.IdempotencyKey, string(j.Args))
	case <-time.After(30 * time.Second):
		fmt.Println("the schedule did not fire")
	}

	// A manual trigger is a firing of its own, never the scheduled one.
	res, _ := client.ScheduleTrigger(ctx, "", "cdp-build", &idem.ScheduleTriggerOpts{Key: "deploy-7"})
	fmt.Println("trigger:", res.Job.IdempotencyKey)
	<-ran
	// Output:
	// next: 2026-11-26T02:00:00Z
	// ran: §cdp-build:default:2026-11-26 {"full":true}
	// trigger: §cdp-build:default:trigger:deploy-7
}
