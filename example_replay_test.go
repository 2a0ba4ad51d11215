package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/idem-dev/idem"
)

// JobReplay enqueues a copy of every finished job a filter selects; each
// copy names its original in metadata.replay_of.
func ExampleClient_JobReplay() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()
	client, _ := idem.NewClient(st, nil)

	orig, _ := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "report", Args: json.RawMessage(`{"day":"2026-11-25"}`)})
	_, _ = client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "email", Args: json.RawMessage(`{}`)})
	// Only finished jobs (completed, dead, cancelled) are replayed: a job
	// that is still to run would run beside its copy.
	_, _ = client.JobCancel(ctx, "", orig.Job.ID)

	n, _ := client.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "report"}, Queue: "replays"})
	copies, _, _ := client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Queue: "replays"}, Limit: 10})
	var meta struct {
		ReplayOf string `json:"replay_of"`
	}
	_ = json.Unmarshal(copies[0].Metadata, &meta)
	fmt.Println("copies:", n, copies[0].Kind, string(copies[0].Args))
	fmt.Println("copy of the original:", meta.ReplayOf == strconv.FormatInt(orig.Job.ID, 10))
	// Output:
	// copies: 1 report {"day":"2026-11-25"}
	// copy of the original: true
}
