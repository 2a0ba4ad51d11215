package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestDLQRequeueKeepsPartitionOrderAcrossRequests: `dlq requeue` of more
// dead jobs than one request takes sends the oldest first, so that a FIFO
// partition whose dead jobs span two requests runs its oldest job first. A
// worker claims right after the first request (as one woken by it would).
// Before the fix the ids went newest first: the first request requeued
// the partition's newer job, which ran at once (its older sibling was
// still dead, so finished), before the older one was requeued.
func TestDLQRequeueKeepsPartitionOrderAcrossRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(client, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var requeues int
	var claimed []int64 // the partition's jobs a worker claimed after the first requeue request
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/dlq/requeue" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if requeues++; requeues != 1 {
			return
		}
		now := time.Now().UTC()
		jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"dq"}, Kinds: []string{"ordered"},
			WorkerID: "w", Limit: 10, LeaseUntil: now.Add(time.Minute), Now: now})
		if err != nil {
			t.Errorf("claim: %v", err)
		}
		for _, j := range jobs {
			claimed = append(claimed, j.ID)
		}
	}))
	t.Cleanup(hs.Close)
	secret, k := idemhttp.NewAPIKey("default", true, "t", time.Now())
	if err := st.APIKeyCreate(ctx, k); err != nil {
		t.Fatal(err)
	}
	cl, err := idemclient.New(hs.URL, &idemclient.Config{APIKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	// The partition's older job, 999 other dead jobs, the partition's
	// newer job: 1,001 dead jobs, two requests.
	reqs := []*idemclient.EnqueueRequest{{Kind: "ordered", Queue: "dq", MaxAttempts: 1, PartitionKey: "p"}}
	for range 999 {
		reqs = append(reqs, &idemclient.EnqueueRequest{Kind: "filler", Queue: "dq", MaxAttempts: 1})
	}
	res, err := cl.EnqueueBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	older := res[0].Job.ID
	newer, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "ordered", Queue: "dq", MaxAttempts: 1, PartitionKey: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for dead := 0; dead < 1001; {
		jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"dq"}, WorkerID: "w", Limit: 100})
		if err != nil || len(jobs) == 0 {
			t.Fatalf("claim: %d %v", len(jobs), err)
		}
		for _, j := range jobs {
			if _, err := cl.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
				t.Fatal(err)
			}
			dead++
		}
	}
	out, errs, code := run(t, "dlq", "requeue", "--queue", "dq", "--limit", "2000", "--url", hs.URL, "--api-key", secret)
	if code != 0 || !strings.Contains(out, "requeued 1001 jobs") {
		t.Fatalf("requeue: exit %d %q %q", code, out, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(claimed) != 1 || strconv.FormatInt(claimed[0], 10) != older {
		t.Fatalf("after the first requeue request a worker claimed %v of partition p; want its older job %s first (the newer is %s)",
			claimed, older, newer.Job.ID)
	}
}
