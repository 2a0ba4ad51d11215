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

// Seed 001's completion job: "an optional job enqueued when every child has
// finished (with the children's outcomes)". OnFinish is created with the
// batch, in the same transaction; it waits until every file's job has
// finished — completed, dead or cancelled — then runs once, and its handler
// reads the outcomes with FinishedBatch.
func Example_batchUploadOnFinish() {
	ctx := context.Background()
	c, done := open(&idem.Config{Now: newClock().Now, DedupWindow: idem.DedupForever, MaxAttempts: 1})
	defer done()

	b, _ := c.BatchCreate(ctx, idem.BatchCreateParams{Key: "batch_upload-18",
		Jobs: []idem.EnqueueParams{
			{Kind: "import_file", Args: json.RawMessage(`{"file":"a.csv"}`), Opts: &idem.EnqueueOpts{Queue: "imports"}},
			{Kind: "import_file", Args: json.RawMessage(`{"file":"b.csv"}`), Opts: &idem.EnqueueOpts{Queue: "imports"}},
			{Kind: "import_file", Args: json.RawMessage(`{"file":"broken.csv"}`), Opts: &idem.EnqueueOpts{Queue: "imports"}},
		},
		OnFinish: &idem.EnqueueParams{Kind: "notify_user", Args: json.RawMessage(`{"user":"u-18"}`),
			Opts: &idem.EnqueueOpts{Queue: "notify"}}})
	fmt.Println("completion job:", b.OnFinish.Kind, b.OnFinish.State)

	for j := work(ctx, c, "imports"); j != nil; j = work(ctx, c, "imports") {
		if string(j.Args) == `{"file":"broken.csv"}` {
			c.Fail(ctx, "", j.ID, j.LeaseToken, idem.FailParams{Error: "not a CSV file", ErrorCode: "BAD_CSV"})
			continue
		}
		c.Complete(ctx, "", j.ID, j.LeaseToken, json.RawMessage(`{"rows":120}`))
		fmt.Println("while files remain, notify_user claimable:", work(ctx, c, "notify") != nil)
	}

	// Every file finished: the completion job runs and reads the outcomes.
	n := work(ctx, c, "notify")
	fin, _ := c.FinishedBatch(ctx, n)
	fmt.Printf("notify_user: batch %d finished %v: %d completed, %d dead\n", fin.ID, fin.Finished,
		fin.Counts[idem.StateCompleted], fin.Counts[idem.StateDead])
	for _, j := range fin.Jobs {
		if j.State == idem.StateDead {
			fmt.Println("  failed:", string(j.Args), j.ErrorCode)
		}
	}
	// Output:
	// completion job: notify_user pending
	// while files remain, notify_user claimable: false
	// while files remain, notify_user claimable: false
	// notify_user: batch 1 finished true: 2 completed, 1 dead
	//   failed: {"file":"broken.csv"} BAD_CSV
}
