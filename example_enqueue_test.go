package idem_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// Enqueueing twice with one idempotency key creates one job: the second call
// returns the first job with Existing set.
func ExampleClient_Enqueue() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idem-example-")
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	client, _ := idem.NewClient(st, nil)

	opts := &idem.EnqueueOpts{IdempotencyKey: "welcome-email-42"}
	first, _ := client.Enqueue(ctx, SendArgs{To: "ada@example.com"}, opts)
	again, _ := client.Enqueue(ctx, SendArgs{To: "ada@example.com"}, opts)
	fmt.Println(first.Existing, again.Existing, first.Job.ID == again.Job.ID, again.Job.State)

	_, err = client.Enqueue(ctx, SendArgs{To: "bob@example.com"}, opts)
	fmt.Println(err)
	// Output:
	// false true true available
	// idempotency key "welcome-email-42" reused with a different request (job 1)
}
