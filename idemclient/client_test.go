package idemclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// setup serves the API on a fresh SQLite file behind wrap (nil = none).
func setup(t *testing.T, wrap func(http.Handler) http.Handler) (*idemclient.Client, *httptest.Server) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
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
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	secret, k := idemhttp.NewAPIKey("default", true, "t", time.Now())
	if err := st.APIKeyCreate(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	cl, err := idemclient.New(hs.URL, &idemclient.Config{APIKey: secret, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return cl, hs
}

// loseCancel serves every request but loses the first reply to a cancel.
func loseCancel() func(http.Handler) http.Handler {
	var lost atomic.Bool
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/cancel") || lost.Swap(true) {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusBadGateway)
		})
	}
}

// loseResponses serves every request but replaces the first n answers to
// POSTs by a 503, as if the reply was lost.
func loseResponses(n int64) func(http.Handler) http.Handler {
	var seen atomic.Int64
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || seen.Add(1) > n {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusServiceUnavailable)
		})
	}
}

func TestRetriesReuseTheKey(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, loseResponses(2))
	ctx := context.Background()
	res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "pay", Args: []byte(`{"amount":5}`)})
	if err != nil {
		t.Fatal(err)
	}
	// The first two attempts created the job but their replies were lost:
	// the third gets the same job back.
	if !res.Existing || !res.Replayed {
		t.Fatalf("retry created a second job? %+v", res)
	}
	page, err := cl.ListJobs(ctx, nil)
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("jobs %v %v", page, err)
	}
}

func TestRetriedCancelReplays(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, loseCancel())
	ctx := context.Background()
	res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	// The first cancel worked but its reply was lost; the retry carries the
	// same Idempotency-Key and gets the stored 200, not a 409.
	j, err := cl.CancelJob(ctx, res.Job.ID)
	if err != nil || j.State != "cancelled" {
		t.Fatalf("cancel %v %v", j, err)
	}
}

func TestTypedErrors(t *testing.T) {
	t.Parallel()
	cl, hs := setup(t, nil)
	ctx := context.Background()
	_, err := cl.GetJob(ctx, "12345")
	var pe *idemclient.Error
	if !errors.As(err, &pe) || pe.Status != 404 || !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	_, err = cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: ""})
	if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &pe) || pe.Errors["kind"] == "" {
		t.Fatalf("empty kind: %v", err)
	}
	if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "a", IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "b", IdempotencyKey: "k"})
	if !errors.Is(err, idem.ErrKeyReused) || !errors.As(err, &pe) || pe.JobID == "" {
		t.Fatalf("reused key: %v", err)
	}
	res, _ := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "c", Queue: "pull"})
	if _, err := cl.CancelJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CancelJob(ctx, res.Job.ID); !errors.Is(err, idem.ErrWrongState) {
		t.Fatalf("cancel twice: %v", err)
	}
	bad, _ := idemclient.New(hs.URL, &idemclient.Config{APIKey: "idem_nope", MaxRetries: -1})
	if _, err := bad.Stats(ctx); !errors.As(err, &pe) || pe.Status != 401 {
		t.Fatalf("bad key: %v", err)
	}
}

func TestPullWorkerFlow(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, nil)
	ctx := context.Background()
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"q"}, WorkerID: "w"})
	if err != nil || jobs == nil || len(jobs) != 0 {
		t.Fatalf("empty claim %v %v", jobs, err)
	}
	if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	jobs, err = cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"q"}, WorkerID: "w", Lease: 10 * time.Second})
	if err != nil || len(jobs) != 1 || jobs[0].LeaseToken == "" {
		t.Fatalf("claim %v %v", jobs, err)
	}
	id, tok := jobs[0].ID, jobs[0].LeaseToken
	if _, err := cl.Heartbeat(ctx, id, tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Heartbeat(ctx, id, "bad", 0); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("bad token: %v", err)
	}
	j, err := cl.Fail(ctx, id, tok, &idemclient.FailRequest{Error: "boom"})
	if err != nil || j.State != "dead" {
		t.Fatalf("fail %v %v", j, err)
	}
	page, err := cl.DLQList(ctx, nil)
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("dlq %v %v", page, err)
	}
	if n, err := cl.DLQRequeue(ctx, []string{id}, nil); err != nil || n != 1 {
		t.Fatalf("requeue %d %v", n, err)
	}
	jobs, _ = cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"q"}, WorkerID: "w"})
	if j, err := cl.Complete(ctx, id, jobs[0].LeaseToken, []byte(`{"ok":true}`)); err != nil || j.State != "completed" {
		t.Fatalf("complete %v %v", j, err)
	}
	atts, err := cl.Attempts(ctx, id)
	if err != nil || len(atts) != 2 || atts[0].Outcome != "dead" || atts[1].Outcome != "completed" {
		t.Fatalf("attempts %v %v", atts, err)
	}
	if n, err := cl.Replay(ctx, idemclient.Filter{Queue: "q"}, "copies"); err != nil || n != 1 {
		t.Fatalf("replay %d %v", n, err)
	}
	if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", IdempotencyKey: "rk"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := cl.GetRecord(ctx, "rk"); err != nil || rec.Status != "in_progress" {
		t.Fatalf("record %v %v", rec, err)
	}
	if err := cl.DeleteRecord(ctx, "rk"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RecordStats(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Stats(ctx); err != nil || st.Queues["q"] == nil {
		t.Fatalf("stats %v %v", st, err)
	}
	if h, err := cl.HealthChecks(ctx); err != nil || h.Status != "degraded" || h.Checks["success_rate_1m"].Status != "degraded" { // 1 of 2 attempts failed in the last minute
		t.Fatalf("health %+v %v", h, err)
	}
	batch, err := cl.EnqueueBatch(ctx, []*idemclient.EnqueueRequest{{Kind: "a"}, {Kind: ""}})
	if err != nil || len(batch) != 2 || batch[0].Job == nil || batch[1].Error == nil {
		t.Fatalf("batch %v %v", batch, err)
	}
}
