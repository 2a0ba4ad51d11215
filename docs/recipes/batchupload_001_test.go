package recipes_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/key"
)

// Seed 001, exactly-once batch and job creation: an upload of three files
// is one batch whose key is the content key of the upload; a double click
// sends the same request twice (the second answers "you already uploaded
// this" with the same batch); a first request that failed on a bad file is
// retried after the fix and then creates the batch; keys are kept forever.
func Example_batchUpload() {
	ctx := context.Background()
	c, done := open(&idem.Config{Now: newClock().Now, DedupWindow: idem.DedupForever})
	defer done()

	upload := json.RawMessage(`{"user":"u-17","files":["a.csv","b.csv","c.csv"]}`)
	batchKey, _ := key.Prefixed("batch", upload)
	files := func(names ...string) []idem.EnqueueParams {
		out := make([]idem.EnqueueParams, len(names))
		for i, n := range names {
			out[i] = idem.EnqueueParams{Kind: "import_file", Args: json.RawMessage(`{"file":"` + n + `"}`)}
		}
		return out
	}

	// The first request names a dependency that does not exist: nothing
	// is created, and the client may retry.
	bad := files("a.csv", "b.csv", "c.csv")
	bad[2].Opts = &idem.EnqueueOpts{DependsOn: []int64{999}}
	_, err := c.BatchCreate(ctx, idem.BatchCreateParams{Key: batchKey, Jobs: bad})
	fmt.Println("first request failed:", err != nil)

	// The retry, then a double click (files listed in another order).
	b1, _ := c.BatchCreate(ctx, idem.BatchCreateParams{Key: batchKey, Jobs: files("a.csv", "b.csv", "c.csv")})
	b2, _ := c.BatchCreate(ctx, idem.BatchCreateParams{Key: batchKey, Jobs: files("c.csv", "a.csv", "b.csv")})
	fmt.Println("retry: batch", b1.ID, "existing", b1.Existing, "jobs", b1.Total)
	fmt.Println("double click: batch", b2.ID, "existing", b2.Existing, "- you already uploaded this")
	jobs, _, _ := c.JobList(ctx, &idem.JobListParams{})
	fmt.Println("jobs in the store:", len(jobs))
	// Output:
	// first request failed: true
	// retry: batch 1 existing false jobs 3
	// double click: batch 1 existing true - you already uploaded this
	// jobs in the store: 3
}
