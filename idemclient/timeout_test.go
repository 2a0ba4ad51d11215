package idemclient_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/store"
)

// TestEnqueueTimeout: EnqueueRequest.Timeout is sent as the job's
// "timeout" (as the TypeScript and PHP clients send it) and stored with
// the job, by Enqueue and by EnqueueBatch.
func TestEnqueueTimeout(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	d := 90 * time.Second
	one := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "slow", Timeout: &d})
	res, err := e.admin.EnqueueBatch(ctx, []*idemclient.EnqueueRequest{{Kind: "slow", Args: []byte(`{"n":2}`), Timeout: &d}})
	if err != nil || len(res) != 1 || res[0].Job == nil {
		t.Fatalf("batch: %+v %v", res, err)
	}
	for _, id := range []string{one.ID, res[0].Job.ID} {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		row, err := e.st.JobGet(ctx, &store.JobGetParams{ID: n})
		if err != nil {
			t.Fatal(err)
		}
		if row.Timeout != d {
			t.Errorf("job %s: timeout %v, want %v", id, row.Timeout, d)
		}
	}
}
