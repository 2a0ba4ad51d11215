package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
)

func TestBatchesDLQAndLeases(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, nil)
	ctx := context.Background()
	jobs := []*idemclient.EnqueueRequest{{Kind: "upload", Queue: "up", Args: json.RawMessage(`{"f":"a"}`)},
		{Kind: "upload", Queue: "up", Args: json.RawMessage(`{"f":"b"}`)}}
	b, err := cl.BatchCreate(ctx, "upload-1", json.RawMessage(`{"user":"u"}`), jobs)
	if err != nil || b.Existing || b.Batch.Total != 2 {
		t.Fatalf("create: %+v %v", b, err)
	}
	again, err := cl.BatchCreate(ctx, "upload-1", nil, jobs[:1])
	if err != nil || !again.Existing || again.Batch.ID != b.Batch.ID {
		t.Fatalf("repeat: %+v %v", again, err)
	}
	got, err := cl.BatchGet(ctx, b.Batch.ID)
	if err != nil || got.Counts["available"] != 2 {
		t.Fatalf("get: %+v %v", got, err)
	}
	claimed, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"up"}, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	dead, err := cl.Fail(ctx, claimed[0].ID, claimed[0].LeaseToken, &idemclient.FailRequest{Error: "bad csv", NoRetry: true, ErrorCode: "BAD_CSV"})
	if err != nil || dead.State != "dead" || dead.ErrorCode != "BAD_CSV" {
		t.Fatalf("fail: %+v %v", dead, err)
	}
	page, err := cl.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{ErrorCode: "BAD_CSV"}})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("dlq by code: %+v %v", page, err)
	}
	resolved, err := cl.DLQResolve(ctx, dead.ID, "bad file, user told")
	if err != nil || resolved.ResolvedAt == nil {
		t.Fatalf("resolve: %+v %v", resolved, err)
	}
	if c, err := cl.BatchCancel(ctx, b.Batch.ID); err != nil || !c.Finished {
		t.Fatalf("cancel: %+v %v", c, err)
	}

	l, err := cl.LeaseAcquire(ctx, "geo-1", 0, 0)
	if err != nil || !l.Acquired {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	if _, err := cl.LeaseRenew(ctx, "geo-1", l.LeaseToken, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.LeaseComplete(ctx, "geo-1", l.LeaseToken, json.RawMessage(`{"n":1}`), 0); err != nil {
		t.Fatal(err)
	}
	hit, err := cl.LeaseAcquire(ctx, "geo-1", 0, 0)
	if err != nil || !hit.Cached || string(hit.Result) != `{"n":1}` {
		t.Fatalf("hit: %+v %v", hit, err)
	}
	// Lease keys live in Do's namespace: the records API (job keys) does
	// not see them; the cached result is read through LeaseAcquire.
	if rec, err := cl.GetRecordResult(ctx, "geo-1"); err == nil {
		t.Fatalf("lease key visible as a job key's record: %+v", rec)
	}
	l2, _ := cl.LeaseAcquire(ctx, "geo-2", 0, 0)
	if err := cl.LeaseRelease(ctx, "geo-2", l2.LeaseToken); err != nil {
		t.Fatal(err)
	}
}

func TestBatchOnFinishAndRetry(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, nil)
	ctx := context.Background()
	jitter := 0.0
	retry := &idemclient.RetryPolicy{MaxAttempts: 5, Base: 5 * time.Second, Jitter: &jitter}
	b, err := cl.BatchCreateWith(ctx, &idemclient.BatchCreateRequest{Key: "upload-2",
		Jobs:     []*idemclient.EnqueueRequest{{Kind: "upload", Queue: "up2", Args: json.RawMessage(`{"f":"a"}`), Retry: retry}},
		OnFinish: &idemclient.EnqueueRequest{Kind: "report", Queue: "reports"}})
	if err != nil || b.Batch.OnFinish == nil || b.Batch.OnFinish.State != "pending" {
		t.Fatalf("create: %+v %v", b, err)
	}
	child := b.Batch.Jobs[0]
	if child.MaxAttempts != 5 || child.Retry == nil || *child.Retry.Base != "5s" {
		t.Fatalf("child's retry: %+v", child)
	}
	claimed, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"up2"}, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	before := time.Now()
	failed, err := cl.Fail(ctx, claimed[0].ID, claimed[0].LeaseToken, &idemclient.FailRequest{Error: "busy"})
	if err != nil || failed.State != "retryable" || failed.RunAt.Before(before.Add(5*time.Second-time.Millisecond)) ||
		failed.RunAt.After(time.Now().Add(5*time.Second)) {
		t.Fatalf("fail: %+v %v", failed, err)
	}
	if _, err := cl.CancelJob(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	got, err := cl.BatchGet(ctx, b.Batch.ID)
	if err != nil || got.OnFinish == nil || got.OnFinish.State != "available" || !got.Finished {
		t.Fatalf("after the child: %+v %v", got, err)
	}
	// Bad retry: a 400 naming the field.
	_, err = cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", Retry: &idemclient.RetryPolicy{Factor: 0.5}})
	var pe *idemclient.Error
	if !errors.As(err, &pe) || pe.Status != 400 || pe.Errors["retry.factor"] == "" {
		t.Fatalf("bad retry: %v", err)
	}
}

// TestBatchCreateNeedsAKey: a batch without a key is refused (400 naming
// "key"), as the server, the TypeScript and PHP clients and the CLI refuse
// it, not created under the random header key the client makes for a
// POST (a batch made once per key no caller knows).
func TestBatchCreateNeedsAKey(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, nil)
	ctx := context.Background()
	res, err := cl.BatchCreate(ctx, "", nil, []*idemclient.EnqueueRequest{{Kind: "upload", Queue: "up"}})
	var pe *idemclient.Error
	if !errors.As(err, &pe) || pe.Status != 400 || pe.Errors["key"] == "" {
		t.Fatalf("a batch without a key: %+v, %v", res, err)
	}
}
