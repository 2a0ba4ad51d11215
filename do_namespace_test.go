package idem_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem"
)

// Issue 8 item 1: a Do key and a job idempotency key spelled alike are two
// keys; the job runs instead of completing with Do's cached result.
func TestDoKeyApartFromJobKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &idem.Config{Queues: queues(1)})
	ran := make(chan string, 1)
	idem.AddWorker(b.workers, idem.WorkFunc[SendArgs](func(ctx context.Context, job *idem.Job[SendArgs]) (any, error) {
		ran <- job.Args.To
		return "sent", nil
	}))
	b.start(t)
	if _, err := b.client.Do(ctx, "shared", func(context.Context) (any, error) { return "from do", nil }, nil); err != nil {
		t.Fatal(err)
	}
	res, err := b.client.Enqueue(ctx, SendArgs{To: "job"}, &idem.EnqueueOpts{IdempotencyKey: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-ran; got != "job" {
		t.Fatalf("worker ran %q", got)
	}
	row := waitState(t, b, res.Job.ID, idem.StateCompleted)
	if row.WasCached || string(row.Result) != `"sent"` {
		t.Fatalf("job completed with %s (cached %v)", row.Result, row.WasCached)
	}
	r, err := b.client.Do(ctx, "shared", func(context.Context) (any, error) { return "again", nil }, nil)
	if err != nil || !r.WasCached || string(r.Result) != `"from do"` {
		t.Fatalf("do after job: %+v %v", r, err)
	}
}
