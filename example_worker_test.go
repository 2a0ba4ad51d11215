package idem_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// A typed worker runs jobs of its args' kind; its result is stored with the
// job.
func ExampleAddWorker() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idem-example-")
	defer os.RemoveAll(dir)
	st, _ := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	defer st.Close()

	workers := idem.NewWorkers()
	idem.AddWorker(workers, idem.WorkFunc[SendArgs](func(ctx context.Context, job *idem.Job[SendArgs]) (any, error) {
		return map[string]string{"sent_to": job.Args.To}, nil
	}))
	client, _ := idem.NewClient(st, &idem.Config{Workers: workers,
		Queues: map[string]idem.QueueConfig{idem.DefaultQueue: {MaxWorkers: 4}}})
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	res, _ := client.Enqueue(ctx, SendArgs{To: "ada@example.com"}, nil)
	job, _ := client.JobWait(ctx, res.Job.ID) // returns once the job is finished
	fmt.Println(job.State, string(job.Result))
	// Output: completed {"sent_to":"ada@example.com"}
}
