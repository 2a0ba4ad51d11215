package idemclient_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestDotKeysAndNames: "." and ".." are valid keys and names (printable
// ASCII), but as bare path segments an HTTP server removes them as dot
// segments and redirects elsewhere (GET /v1/idempotency/. is the record
// statistics). The client addresses them as themselves.
func TestDotKeysAndNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl, _ := setup(t, nil)
	for _, k := range []string{".", ".."} {
		res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", IdempotencyKey: k})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := cl.GetRecord(ctx, k)
		if err != nil || rec.Key != k || rec.JobID != res.Job.ID {
			t.Fatalf("GetRecord(%q) = %+v, %v; want the record of job %s", k, rec, err, res.Job.ID)
		}
		if err := cl.DeleteRecord(ctx, k); err != nil {
			t.Fatalf("DeleteRecord(%q): %v", k, err)
		}
		if _, err := cl.GetRecord(ctx, k); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("GetRecord(%q) after delete: %v, want ErrNotFound", k, err)
		}
	}
	sc, err := cl.PutSchedule(ctx, "..", &idemclient.ScheduleRequest{Every: ptr("1h"), Kind: "tick"})
	if err != nil || sc.Name != ".." {
		t.Fatalf("PutSchedule(..) = %+v, %v", sc, err)
	}
	if got, err := cl.GetSchedule(ctx, ".."); err != nil || got.Name != ".." {
		t.Fatalf("GetSchedule(..) = %+v, %v", got, err)
	}
}
