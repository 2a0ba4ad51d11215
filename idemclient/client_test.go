package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// setup serves the API on a fresh SQLite file behind wrap (nil = none).
func setup(t *testing.T, wrap func(http.Handler) http.Handler) (*idemclient.Client, *httptest.Server) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return serveOn(t, st, wrap)
}

// serveOn serves the API on st behind wrap (nil = none) with an admin key
// of tenant "default", and returns a client of it with short backoffs.
func serveOn(t *testing.T, st store.Store, wrap func(http.Handler) http.Handler) (*idemclient.Client, *httptest.Server) {
	t.Helper()
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

// TestRetriedPublishPublishesOnce: Publish without a body key sends a
// random Idempotency-Key header and retries a lost reply with it; the
// server takes the header key as the event key, so the retry gets the
// event the lost attempt stored.
func TestRetriedPublishPublishesOnce(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, loseResponses(1))
	ctx := context.Background()
	res, err := cl.Publish(ctx, "orders", &idemclient.PublishRequest{Type: "order.paid", Payload: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Existing {
		t.Errorf("the retry of a lost publish: %+v, want the existing event", res)
	}
	evs, _, err := cl.Events(ctx, "orders", "", nil, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("one Publish call whose first reply was lost made %d events, want 1", len(evs))
	}
	// Without a lost reply every call is a new event (a new random key).
	if _, err := cl.Publish(ctx, "orders", &idemclient.PublishRequest{Type: "order.paid", Payload: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	if evs, _, err = cl.Events(ctx, "orders", "", nil, 0, ""); err != nil || len(evs) != 2 {
		t.Fatalf("two publishes: %d events, %v", len(evs), err)
	}
}

// TestRetriedLeaseAcquireGetsItsLease: the retry of a LeaseAcquire whose
// 200 was lost replays that 200 (the same Idempotency-Key), so the caller
// holds the lease instead of finding it held by nobody it knows.
func TestRetriedLeaseAcquireGetsItsLease(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, loseResponses(1))
	ctx := context.Background()
	l, err := cl.LeaseAcquire(ctx, "report-7", time.Minute, time.Hour)
	if err != nil || !l.Acquired || l.LeaseToken == "" {
		t.Fatalf("acquire whose first reply was lost: %+v %v (ErrKeyInProgress: %v)", l, err, errors.Is(err, idem.ErrKeyInProgress))
	}
	if _, err := cl.LeaseComplete(ctx, "report-7", l.LeaseToken, json.RawMessage(`{"ok":true}`), 0); err != nil {
		t.Fatalf("complete with the replayed token: %v", err)
	}
}

// TestLeaseAcquireRetriesWhileHeld: a 409 (the key held by another holder)
// is not stored for replay: the client's retry of it, with the same
// Idempotency-Key, asks again and gets the result once the holder is done.
func TestLeaseAcquireRetriesWhileHeld(t *testing.T) {
	t.Parallel()
	var complete atomic.Pointer[func()]
	cl, _ := setup(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			// The holder completes after the first 409, before that
			// answer reaches the client: its retry must ask again.
			if rec.Code == http.StatusConflict && strings.HasSuffix(r.URL.Path, "/lease") {
				if f := complete.Swap(nil); f != nil {
					(*f)()
				}
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	})
	ctx := context.Background()
	l, err := cl.LeaseAcquire(ctx, "report-8", time.Minute, time.Hour)
	if err != nil || !l.Acquired {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	f := func() {
		if _, err := cl.LeaseComplete(ctx, "report-8", l.LeaseToken, json.RawMessage(`{"n":8}`), 0); err != nil {
			t.Errorf("complete: %v", err)
		}
	}
	complete.Store(&f)
	got, err := cl.LeaseAcquire(ctx, "report-8", time.Minute, time.Hour)
	if err != nil || !got.Cached || string(got.Result) != `{"n":8}` {
		t.Fatalf("acquire while held, then completed: %+v %v", got, err)
	}
	if complete.Load() != nil {
		t.Fatal("the second acquire never saw the key held")
	}
}

// TestRetriedDeleteSucceeds: a DELETE whose 204 is lost is retried; the
// retry's 404 means the first attempt deleted, so the call succeeds. A 404
// on the first attempt is still ErrNotFound.
func TestRetriedDeleteSucceeds(t *testing.T) {
	t.Parallel()
	var lost atomic.Bool
	cl, _ := setup(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodDelete || lost.Swap(true) {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusBadGateway)
		})
	})
	ctx := context.Background()
	if _, err := cl.PutSchedule(ctx, "nightly", &idemclient.ScheduleRequest{Every: ptr("1h"), Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSchedule(ctx, "nightly"); err != nil {
		t.Fatalf("delete whose first reply was lost: %v (ErrNotFound: %v)", err, errors.Is(err, idem.ErrNotFound))
	}
	if _, err := cl.GetSchedule(ctx, "nightly"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("the schedule is still there: %v", err)
	}
	if err := cl.DeleteSchedule(ctx, "nightly"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete of a missing schedule: %v, want ErrNotFound", err)
	}
}

// TestDeleteRecordIsNotRetried: a retry of DeleteRecord could delete a
// record that an enqueue made again after the first attempt deleted, so
// DeleteRecord is sent once: a lost reply is the caller's error to judge.
func TestDeleteRecordIsNotRetried(t *testing.T) {
	t.Parallel()
	var deletes atomic.Int32
	cl, _ := setup(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodDelete {
				next.ServeHTTP(w, r)
				return
			}
			deletes.Add(1)
			next.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusBadGateway)
		})
	})
	ctx := context.Background()
	if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", IdempotencyKey: "rec-1"}); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteRecord(ctx, "rec-1"); err == nil {
		t.Fatal("a lost reply reported success")
	}
	if n := deletes.Load(); n != 1 {
		t.Fatalf("DeleteRecord sent %d times, want 1", n)
	}
}

// TestBackoffBounds: a MaxBackoff below MinBackoff is raised to MinBackoff
// (as the TypeScript and PHP clients do), not to the 5s default: a caller
// who capped the backoff at 50ms does not wait up to 5s (a Retry-After
// of seconds was honoured up to it).
func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg              idemclient.Config
		wantMin, wantMax time.Duration
	}{
		{idemclient.Config{}, idemclient.DefaultMinBackoff, idemclient.DefaultMaxBackoff},
		{idemclient.Config{MaxBackoff: 50 * time.Millisecond}, idemclient.DefaultMinBackoff, idemclient.DefaultMinBackoff},
		{idemclient.Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, 10 * time.Millisecond, 50 * time.Millisecond},
		{idemclient.Config{MinBackoff: 10 * time.Second}, 10 * time.Second, 10 * time.Second},
	} {
		cl, err := idemclient.New("http://127.0.0.1:1", &c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if lo, hi := idemclient.BackoffBounds(cl); lo != c.wantMin || hi != c.wantMax {
			t.Errorf("Min %v Max %v: bounds %v..%v, want %v..%v", c.cfg.MinBackoff, c.cfg.MaxBackoff, lo, hi, c.wantMin, c.wantMax)
		}
	}
}

// TestRequestsKeepHTMLCharacters: the client sends args as they are:
// '<', '>' and '&' were HTML-escaped by encoding/json (six bytes for one),
// so args of 200 KiB of '<', well within the server's 1 MiB limits, made
// a request body over 1 MiB (413) and were stored escaped, six times as
// long as given.
func TestRequestsKeepHTMLCharacters(t *testing.T) {
	t.Parallel()
	cl, _ := setup(t, nil)
	args := json.RawMessage(`{"h":"` + strings.Repeat("<&>", 200<<10/3) + `"}`)
	res, err := cl.Enqueue(context.Background(), &idemclient.EnqueueRequest{Kind: "k", Args: args,
		Metadata: json.RawMessage(`{"m":"<i>"}`)})
	if err != nil {
		t.Fatalf("enqueue of %d bytes of args: %v", len(args), err)
	}
	if string(res.Job.Args) != string(args) || string(res.Job.Metadata) != `{"m":"<i>"}` {
		t.Errorf("args stored as %d bytes (%.40s…), metadata %s; want them as sent", len(res.Job.Args), res.Job.Args, res.Job.Metadata)
	}
	batch, err := cl.EnqueueBatch(context.Background(), []*idemclient.EnqueueRequest{{Kind: "k", Args: args}})
	if err != nil || len(batch) != 1 || batch[0].Job == nil || string(batch[0].Job.Args) != string(args) {
		t.Fatalf("batch enqueue: %v %+v", err, batch)
	}
}
