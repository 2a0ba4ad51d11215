package idemclient_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

// TestStatsAgreeWithRecordStats: the idempotency section of /v1/stats
// is the same summary GET /v1/idempotency answers.
func TestStatsAgreeWithRecordStats(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	for _, key := range []string{"done-1", "done-2", "open-1", "dead-1"} {
		e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", IdempotencyKey: key, MaxAttempts: 1})
	}
	for i := range 3 {
		j := e.claimOne(e.admin, "q")
		var err error
		if i < 2 {
			_, err = e.admin.Complete(ctx, j.ID, j.LeaseToken, json.RawMessage(`{"ok":true}`))
		} else {
			_, err = e.admin.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rs, err := e.admin.RecordStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.admin.Stats(ctx)
	if err != nil || st.Idempotency == nil {
		t.Fatalf("stats: %+v %v", st, err)
	}
	// (The client's POSTs leave records of their own, so the counts are
	// compared, not fixed.)
	if rs.Completed < 2 || rs.Failed < 1 || rs.InProgress < 1 {
		t.Fatalf("record stats %+v, want completed, failed and in-progress records", rs)
	}
	if *st.Idempotency != *rs {
		t.Fatalf("/v1/stats idempotency %+v\n/v1/idempotency       %+v", *st.Idempotency, *rs)
	}
}

// TestStatsKinds: the per-kind summary of /v1/stats (seed 004's job
// health per function) reaches the Go client: the jobs of each kind
// created in the last 24 hours and the failures among them.
func TestStatsKinds(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	for _, kind := range []string{"report", "report", "sync"} {
		e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: kind, Queue: "q", MaxAttempts: 1})
	}
	j := e.claimOne(e.admin, "q")
	if _, err := e.admin.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	st, err := e.admin.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, s := st.Kinds["report"], st.Kinds["sync"]
	if r == nil || s == nil || r.Count != 2 || s.Count != 1 || r.Failed24h+s.Failed24h != 1 {
		t.Fatalf("kinds %+v (report %+v, sync %+v), want report 2 and sync 1 with one failure between them", st.Kinds, r, s)
	}
}
