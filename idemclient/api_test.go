package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// apiEnv is a real API server on 127.0.0.1 over a fresh SQLite file, with
// an admin client of tenant "default".
type apiEnv struct {
	t     *testing.T
	st    *sqlitestore.Store
	url   string
	admin *idemclient.Client
}

func newAPI(t *testing.T, wrap func(http.Handler) http.Handler) *apiEnv {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	engine, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(engine, st, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	e := &apiEnv{t: t, st: st, url: hs.URL}
	e.admin = e.client("default", true, nil)
	return e
}

// client returns a client with a new key of tenant; cfg may set more.
func (e *apiEnv) client(tenant string, admin bool, cfg *idemclient.Config) *idemclient.Client {
	e.t.Helper()
	secret, k := idemhttp.NewAPIKey(tenant, admin, "test", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	c := idemclient.Config{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if cfg != nil {
		c = *cfg
	}
	c.APIKey = secret
	cl, err := idemclient.New(e.url, &c)
	if err != nil {
		e.t.Fatal(err)
	}
	return cl
}

// enqueue enqueues a job or fails the test.
func (e *apiEnv) enqueue(cl *idemclient.Client, req *idemclient.EnqueueRequest) *idemclient.Job {
	e.t.Helper()
	res, err := cl.Enqueue(context.Background(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Job
}

// claimOne claims the one job of queue or fails the test.
func (e *apiEnv) claimOne(cl *idemclient.Client, queue string) *idemclient.Job {
	e.t.Helper()
	jobs, err := cl.Claim(context.Background(), &idemclient.ClaimRequest{Queues: []string{queue}, WorkerID: "w", Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		e.t.Fatalf("claim %s: %v %v", queue, jobs, err)
	}
	return jobs[0]
}

func TestNewChecksTheBaseURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://example.com", "http://", "http://[::1", "/v1"} {
		if _, err := idemclient.New(u, nil); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080", "https://idem.example.com/", "http://localhost:1/prefix"} {
		if _, err := idemclient.New(u, nil); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}

func TestBaseURLWithTrailingSlash(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	secret, k := idemhttp.NewAPIKey("default", true, "slash", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	cl, err := idemclient.New(e.url+"/", &idemclient.Config{APIKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stats(context.Background()); err != nil {
		t.Fatalf("stats through %s/: %v", e.url, err)
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	e := &idemclient.Error{Status: 404, Title: "Not found", Detail: "job 7"}
	if e.Error() != "idem: 404 Not found: job 7" {
		t.Errorf("with detail: %q", e.Error())
	}
	e.Detail = ""
	if e.Error() != "idem: 404 Not found" {
		t.Errorf("without detail: %q", e.Error())
	}
}

// TestErrorsMapToSentinels drives the server into each kind of problem and
// checks errors.Is against every sentinel: the right one matches, no
// other does.
func TestErrorsMapToSentinels(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	noRetry := e.client("default", true, &idemclient.Config{MaxRetries: -1})

	job := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", IdempotencyKey: "key-1"})
	claimed := e.claimOne(e.admin, "q")
	if _, err := e.admin.Complete(ctx, claimed.ID, claimed.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	lease, err := e.admin.LeaseAcquire(ctx, "work-1", time.Minute, 0)
	if err != nil || !lease.Acquired {
		t.Fatalf("lease: %+v %v", lease, err)
	}

	sentinels := map[string]error{
		"not found": idem.ErrNotFound, "invalid": idem.ErrInvalid, "key reused": idem.ErrKeyReused,
		"wrong state": idem.ErrWrongState, "lease lost": idem.ErrLeaseLost, "key in progress": idem.ErrKeyInProgress,
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		want   string
		status int
	}{
		{"not found", func() error { _, err := e.admin.GetJob(ctx, "999999"); return err }, "not found", 404},
		{"invalid", func() error {
			_, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", MaxAttempts: -3})
			return err
		}, "invalid", 400},
		{"key reused", func() error {
			_, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "other", IdempotencyKey: "key-1"})
			return err
		}, "key reused", 422},
		{"wrong state", func() error { _, err := e.admin.CancelJob(ctx, job.ID); return err }, "wrong state", 409},
		{"lease lost", func() error {
			_, err := e.admin.Heartbeat(ctx, job.ID, claimed.LeaseToken, 0)
			return err
		}, "lease lost", 409},
		{"key in progress", func() error { _, err := noRetry.LeaseAcquire(ctx, "work-1", time.Minute, 0); return err }, "key in progress", 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var pe *idemclient.Error
			if !errors.As(err, &pe) || pe.Status != tc.status || pe.Type == "" || pe.Title == "" {
				t.Fatalf("error %v (%+v), want a %d problem", err, pe, tc.status)
			}
			for name, s := range sentinels {
				if got := errors.Is(err, s); got != (name == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
				}
			}
		})
	}
}

// countPosts counts requests and lets status answer the first n of them
// instead of the server (with Retry-After when retryAfter is set).
type fault struct {
	mu         sync.Mutex
	n          int
	status     int
	body       string
	retryAfter string
	calls      int
	keys       []string
	hook       func()
}

func (f *fault) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls++
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		hit := f.calls <= f.n
		hook := f.hook
		f.mu.Unlock()
		if !hit {
			next.ServeHTTP(w, r)
			return
		}
		if hook != nil {
			hook()
		}
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(f.body))
	})
}

func (f *fault) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		status     int
		n          int
		maxRetries int
		retryAfter string
		wantCalls  int
		wantStatus int // 0 = success
	}{
		{"5xx is retried", 502, 2, 0, "", 3, 0},
		{"429 is retried", 429, 1, 0, "0", 2, 0},
		{"retries give up", 503, 100, 2, "", 3, 503},
		{"no retries", 503, 100, -1, "", 1, 503},
		{"4xx is not retried", 400, 100, 0, "", 1, 400},
		{"404 is not retried", 404, 100, 0, "", 1, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fault{n: tc.n, status: tc.status, retryAfter: tc.retryAfter}
			e := newAPI(t, f.wrap)
			cl := e.client("default", true, &idemclient.Config{MaxRetries: tc.maxRetries, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
			_, err := cl.Stats(ctx)
			var pe *idemclient.Error
			switch {
			case tc.wantStatus == 0 && err != nil:
				t.Fatalf("stats: %v", err)
			case tc.wantStatus != 0 && (!errors.As(err, &pe) || pe.Status != tc.wantStatus):
				t.Fatalf("stats: %v, want a %d", err, tc.wantStatus)
			}
			if got := f.count(); got != tc.wantCalls {
				t.Errorf("%d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

// TestRetriedPostsKeepTheirKey: every retry of a POST carries the same
// Idempotency-Key (the caller's when given); a GET carries none.
func TestRetriedPostsKeepTheirKey(t *testing.T) {
	t.Parallel()
	f := &fault{n: 2, status: 503}
	e := newAPI(t, f.wrap)
	ctx := context.Background()
	f.mu.Lock()
	f.calls, f.keys = 0, nil
	f.mu.Unlock()
	if _, err := e.admin.CancelJob(ctx, "1"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("cancel of a missing job: %v", err)
	}
	f.mu.Lock()
	keys := append([]string(nil), f.keys...)
	f.calls, f.n, f.keys = 0, 2, nil
	f.mu.Unlock()
	if len(keys) != 3 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Fatalf("keys of the attempts %q, want one generated key three times", keys)
	}
	if _, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", IdempotencyKey: "mine"}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	keys = append([]string(nil), f.keys...)
	f.calls, f.n, f.keys = 0, 0, nil
	f.mu.Unlock()
	if len(keys) != 3 || keys[0] != "mine" || keys[2] != "mine" {
		t.Fatalf("keys %q, want the caller's key on every attempt", keys)
	}
	if _, err := e.admin.ListJobs(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.keys) != 1 || f.keys[0] != "" {
		t.Fatalf("a GET carried an Idempotency-Key: %q", f.keys)
	}
}

func TestRetriesStopWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first answer is a 503 and cancels the caller's context; the
	// backoff (an hour) would otherwise hold the call.
	f := &fault{n: 100, status: 503, hook: cancel}
	e := newAPI(t, f.wrap)
	cl := e.client("default", true, &idemclient.Config{MinBackoff: time.Hour, MaxBackoff: time.Hour})
	_, err := cl.Stats(ctx)
	// The context ended while the 503 was on its way: either is the answer.
	var pe *idemclient.Error
	if !(errors.As(err, &pe) && pe.Status == 503) && !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the 503 or the cancellation", err)
	}
	if f.count() != 1 {
		t.Errorf("%d calls after the context ended", f.count())
	}
	// A context already done: no call is retried.
	if _, err := cl.Stats(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: %v", err)
	}
}

func TestNetworkErrorsAreRetried(t *testing.T) {
	t.Parallel()
	var dropped atomic.Int32
	drop := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if dropped.Add(1) == 1 {
				// Hang up without an answer: the client sees a network error.
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	e := newAPI(t, drop)
	// Fresh transports: net/http itself replays a request that failed on a
	// reused connection, which would hide the client's own retry.
	fresh := func(retries int) *idemclient.Client {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		return e.client("default", true, &idemclient.Config{MaxRetries: retries, MinBackoff: time.Millisecond,
			MaxBackoff: 2 * time.Millisecond, HTTPClient: &http.Client{Transport: tr}})
	}
	res, err := fresh(0).Enqueue(context.Background(), &idemclient.EnqueueRequest{Kind: "k"})
	if err != nil || res.Job == nil {
		t.Fatalf("enqueue after a dropped connection: %v", err)
	}
	if dropped.Load() != 2 {
		t.Errorf("%d requests, want 2", dropped.Load())
	}
	noRetry := fresh(-1)
	dropped.Store(0)
	var pe *idemclient.Error
	if _, err := noRetry.Stats(context.Background()); err == nil || errors.As(err, &pe) {
		t.Fatalf("dropped connection without retries: %v, want a network error", err)
	}
}

func TestNonProblemReplies(t *testing.T) {
	t.Parallel()
	f := &fault{n: 1, status: http.StatusBadGateway, body: "upstream gone\n"}
	e := newAPI(t, f.wrap)
	cl := e.client("default", true, &idemclient.Config{MaxRetries: -1})
	f.mu.Lock()
	f.calls = 0
	f.mu.Unlock()
	_, err := cl.Stats(context.Background())
	var pe *idemclient.Error
	if !errors.As(err, &pe) || pe.Status != 502 || pe.Title != "Bad Gateway" || pe.Detail != "upstream gone" {
		t.Fatalf("plain-text 502: %#v", err)
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got http.Header
	capture := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = r.Header.Clone()
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	e := newAPI(t, capture)
	cl := e.client("default", true, &idemclient.Config{Tenant: "acme", UserAgent: "billing/1.2"})
	if _, err := cl.Enqueue(context.Background(), &idemclient.EnqueueRequest{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, want := range map[string]string{"Idem-Tenant": "acme", "User-Agent": "billing/1.2",
		"Content-Type": "application/json", "Accept": "application/json"} {
		if got.Get(k) != want {
			t.Errorf("%s: %q, want %q", k, got.Get(k), want)
		}
	}
	if len(got.Get("Authorization")) < len("Bearer idem_") {
		t.Errorf("Authorization %q", got.Get("Authorization"))
	}
}

func TestTenants(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	asAcme := e.client("default", true, &idemclient.Config{Tenant: "acme"})
	acme := e.client("acme", false, nil)
	globex := e.client("globex", false, nil)

	job := e.enqueue(asAcme, &idemclient.EnqueueRequest{Kind: "k", Queue: "q"})
	if job.Tenant != "acme" {
		t.Fatalf("admin with Tenant acme enqueued into %q", job.Tenant)
	}
	if got, err := acme.GetJob(ctx, job.ID); err != nil || got.ID != job.ID {
		t.Fatalf("acme's own job: %v %v", got, err)
	}
	if _, err := globex.GetJob(ctx, job.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("another tenant's job: %v, want not found", err)
	}
	if _, err := globex.CancelJob(ctx, job.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("cancel of another tenant's job: %v", err)
	}
	if page, err := globex.ListJobs(ctx, nil); err != nil || len(page.Jobs) != 0 {
		t.Fatalf("globex sees %v %v", page, err)
	}
	// A tenant key cannot manage limits.
	var pe *idemclient.Error
	if _, err := acme.LimitPut(ctx, idemclient.LimitScope{Queue: "q"}, idemclient.LimitRequest{Concurrency: ptr(1)}); !errors.As(err, &pe) || pe.Status != 403 {
		t.Fatalf("tenant key puts a limit: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestListJobsFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		ids = append(ids, e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "mail", Queue: "q", PartitionKey: "p"}).ID)
		_ = i
	}
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "sms", Queue: "other", IdempotencyKey: "sms-1"})
	cancelled, err := e.admin.CancelJob(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}

	// Pages of 2, newest first, over the five mail jobs.
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := e.admin.ListJobs(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Kind: "mail"}, Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) > 2 || pages > 3 {
			t.Fatalf("page of %d (page %d)", len(page.Jobs), pages)
		}
		for _, j := range page.Jobs {
			seen = append(seen, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if !equal(seen, want) {
		t.Fatalf("pages %v, want %v", seen, want)
	}

	for _, tc := range []struct {
		name string
		f    idemclient.Filter
		n    int
	}{
		{"state", idemclient.Filter{States: []string{"cancelled"}}, 1},
		{"states", idemclient.Filter{States: []string{"cancelled", "available"}}, 6},
		{"queue", idemclient.Filter{Queue: "other"}, 1},
		{"partition", idemclient.Filter{PartitionKey: "p"}, 5},
		{"idempotency key", idemclient.Filter{IdempotencyKey: "sms-1"}, 1},
		{"since the future", idemclient.Filter{Since: time.Now().Add(time.Hour)}, 0},
		{"until the past", idemclient.Filter{Until: time.Now().Add(-time.Hour)}, 0},
		{"a window around now", idemclient.Filter{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)}, 6},
	} {
		page, err := e.admin.ListJobs(ctx, &idemclient.ListParams{Filter: tc.f})
		if err != nil || len(page.Jobs) != tc.n {
			t.Errorf("%s: %d jobs (%v), want %d", tc.name, len(page.Jobs), err, tc.n)
		}
	}
	if _, err := e.admin.ListJobs(ctx, &idemclient.ListParams{Filter: idemclient.Filter{States: []string{"bogus"}}}); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("unknown state: %v", err)
	}
	if _, err := e.admin.ListJobs(ctx, &idemclient.ListParams{Cursor: "not-a-cursor"}); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("malformed cursor: %v", err)
	}
	if cancelled.FinishedAt == nil {
		t.Errorf("cancelled job without finished_at: %+v", cancelled)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEnqueueFields(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	runAt := time.Now().Add(time.Hour).Truncate(time.Second)
	dep := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "first"})
	window := time.Duration(0)
	res, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: "q", Kind: "k", Args: json.RawMessage(`{"n":1}`),
		Priority: 3, RunAt: runAt, MaxAttempts: 7, PartitionKey: "acct-1", DependsOn: []string{dep.ID},
		IdempotencyKey: "full", DedupWindow: &window, Metadata: json.RawMessage(`{"by":"test"}`)})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Job
	if res.Existing || res.Replayed {
		t.Errorf("first enqueue reported existing: %+v", res)
	}
	if j.Queue != "q" || j.Kind != "k" || j.Priority != 3 || j.MaxAttempts != 7 || j.PartitionKey != "acct-1" ||
		j.IdempotencyKey != "full" || string(j.Metadata) != `{"by":"test"}` || len(j.DependsOn) != 1 || j.DependsOn[0] != dep.ID {
		t.Errorf("job %+v", j)
	}
	if !j.RunAt.Equal(runAt) || j.State != "pending" {
		t.Errorf("run_at %v state %s, want %v pending (waits for its dependency)", j.RunAt, j.State, runAt)
	}
	var args map[string]int
	if json.Unmarshal(j.Args, &args) != nil || args["n"] != 1 {
		t.Errorf("args %s", j.Args)
	}
	// Without a RunAt the job is available now.
	now := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "now"})
	if now.State != "available" || now.RunAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("job without run_at: %s %v", now.State, now.RunAt)
	}
}

func TestEnqueueBatchItems(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "a", IdempotencyKey: "taken"})
	res, err := e.admin.EnqueueBatch(ctx, []*idemclient.EnqueueRequest{
		{Kind: "a", IdempotencyKey: "taken"}, // the same request: the existing job
		{Kind: "b", IdempotencyKey: "taken"}, // another request with the key: 422
		{Kind: "c"},
		{Kind: "d", MaxAttempts: -1},
	})
	if err != nil || len(res) != 4 {
		t.Fatalf("batch: %v %v", res, err)
	}
	if res[0].Job == nil || !res[0].Existing {
		t.Errorf("item 0: %+v", res[0])
	}
	if res[1].Error == nil || !errors.Is(res[1].Error, idem.ErrKeyReused) {
		t.Errorf("item 1: %+v", res[1])
	}
	if res[2].Job == nil || res[2].Existing || res[2].Job.Kind != "c" {
		t.Errorf("item 2: %+v", res[2])
	}
	if res[3].Error == nil || !errors.Is(res[3].Error, idem.ErrInvalid) || res[3].Job != nil {
		t.Errorf("item 3: %+v", res[3])
	}
	// Over 1,000 items: the whole batch is refused.
	many := make([]*idemclient.EnqueueRequest, 1001)
	for i := range many {
		many[i] = &idemclient.EnqueueRequest{Kind: "k"}
	}
	if res, err := e.admin.EnqueueBatch(ctx, many); !errors.Is(err, idem.ErrInvalid) || res != nil {
		t.Errorf("1,001 items: %d results, %v", len(res), err)
	}
}

func TestRetryJob(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	a := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k"})
	b := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k"})
	if _, err := e.admin.RetryJob(ctx, a.ID, time.Time{}); !errors.Is(err, idem.ErrWrongState) {
		t.Fatalf("retry of an available job: %v", err)
	}
	for _, id := range []string{a.ID, b.ID} {
		if _, err := e.admin.CancelJob(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	j, err := e.admin.RetryJob(ctx, a.ID, time.Time{})
	if err != nil || j.State != "available" {
		t.Fatalf("retry now: %+v %v", j, err)
	}
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	j, err = e.admin.RetryJob(ctx, b.ID, later)
	if err != nil || j.State != "scheduled" || !j.RunAt.Equal(later) {
		t.Fatalf("retry later: %+v %v", j, err)
	}
}

func TestPullWorkerDetails(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", MaxAttempts: 3})
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "other", Queue: "q"})

	// Kinds narrow a claim.
	jobs, err := e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"q"}, Kinds: []string{"k"}, WorkerID: "w1", Limit: 5, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].Kind != "k" || jobs[0].Attempt != 1 || jobs[0].WorkerID != "w1" || jobs[0].LeaseExpiresAt == nil {
		t.Fatalf("claim by kind: %+v %v", jobs, err)
	}
	j := jobs[0]
	exp, err := e.admin.Heartbeat(ctx, j.ID, j.LeaseToken, time.Hour)
	if err != nil || !exp.After(*j.LeaseExpiresAt) {
		t.Fatalf("heartbeat: %v %v, want later than %v", exp, err, j.LeaseExpiresAt)
	}
	// A failure with retry_after 0 is claimable at once, as attempt 2.
	failed, err := e.admin.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "timeout", RetryAfter: ptr(time.Duration(0)), ErrorCode: "UPSTREAM"})
	if err != nil || failed.State != "retryable" || failed.LastError != "timeout" || failed.ErrorCode != "UPSTREAM" {
		t.Fatalf("fail: %+v %v", failed, err)
	}
	if _, err := e.admin.Complete(ctx, j.ID, j.LeaseToken, nil); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("complete with the old token: %v", err)
	}
	jobs, err = e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"q"}, Kinds: []string{"k"}, WorkerID: "w2", Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reclaim: %v %v", jobs, err)
	}
	again := jobs[0]
	if again.ID != j.ID || again.Attempt != 2 {
		t.Fatalf("reclaim: %+v", again)
	}
	done, err := e.admin.Complete(ctx, again.ID, again.LeaseToken, json.RawMessage(`{"a":1,"b":2}`))
	if err != nil || done.State != "completed" {
		t.Fatalf("complete: %+v %v", done, err)
	}
	// The same completion again (the same JSON value) is idempotent;
	// another result is refused.
	if d, err := e.admin.Complete(ctx, again.ID, again.LeaseToken, json.RawMessage(`{"b":2, "a":1}`)); err != nil || d.State != "completed" {
		t.Fatalf("repeated complete: %+v %v", d, err)
	}
	var pe *idemclient.Error
	if _, err := e.admin.Complete(ctx, again.ID, again.LeaseToken, json.RawMessage(`{"a":2}`)); !errors.As(err, &pe) || pe.Status != 409 {
		t.Fatalf("complete with another result: %v", err)
	}
	atts, err := e.admin.Attempts(ctx, j.ID)
	if err != nil || len(atts) != 2 || atts[0].Outcome != "failed" || atts[0].Error != "timeout" || atts[0].Worker != "w1" || atts[1].Outcome != "completed" {
		t.Fatalf("attempts %+v %v", atts, err)
	}
	if _, err := e.admin.Attempts(ctx, "424242"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("attempts of a missing job: %v", err)
	}
}

func TestClaimLongPoll(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	type claimed struct {
		jobs []*idemclient.Job
		err  error
	}
	done := make(chan claimed, 1)
	go func() {
		jobs, err := e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"slow"}, WorkerID: "w", Wait: 30 * time.Second})
		done <- claimed{jobs, err}
	}()
	// Whether the claim is already waiting or not, it gets the job.
	job := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "slow"})
	got := <-done
	if got.err != nil || len(got.jobs) != 1 || got.jobs[0].ID != job.ID {
		t.Fatalf("long poll: %+v %v", got.jobs, got.err)
	}
	// A wait past the maximum is refused.
	if _, err := e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"slow"}, WorkerID: "w", Wait: 2 * time.Minute}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("wait of 2m: %v", err)
	}
}

func TestDLQ(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	var dead []string
	for _, code := range []string{"A", "A", "B"} {
		e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q"})
		j := e.claimOne(e.admin, "q")
		if _, err := e.admin.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "bad", NoRetry: true, ErrorCode: code}); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, j.ID)
	}
	live := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "live"})

	page, err := e.admin.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{States: []string{"available"}}})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("DLQList ignores a state filter: %d jobs %v", len(page.Jobs), err)
	}
	// Resolve one: it stays dead, out of the unresolved list.
	r, err := e.admin.DLQResolve(ctx, dead[2], "bad input, told the customer")
	if err != nil || r.State != "dead" || r.ResolvedAt == nil || r.ResolutionNote != "bad input, told the customer" {
		t.Fatalf("resolve: %+v %v", r, err)
	}
	if _, err := e.admin.DLQResolve(ctx, live.ID, ""); err == nil {
		t.Fatal("resolved a job that is not dead")
	}
	unresolved, err := e.admin.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Resolved: ptr(false)}})
	if err != nil || len(unresolved.Jobs) != 2 {
		t.Fatalf("unresolved: %+v %v", unresolved, err)
	}
	// Requeue by filter (ids empty): only code A.
	n, err := e.admin.DLQRequeue(ctx, nil, &idemclient.Filter{ErrorCode: "A"})
	if err != nil || n != 2 {
		t.Fatalf("requeue by code: %d %v", n, err)
	}
	j, _ := e.admin.GetJob(ctx, dead[0])
	if j.State != "available" || j.Attempt != 0 {
		t.Fatalf("requeued job %+v, want available with its attempts reset", j)
	}
	// Delete: only a dead job.
	if err := e.admin.DLQDelete(ctx, live.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete of a live job: %v", err)
	}
	if err := e.admin.DLQDelete(ctx, dead[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetJob(ctx, dead[2]); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
}

func TestRecordsAndLeases(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", IdempotencyKey: "order-1"})
	j := e.claimOne(e.admin, "q")
	if _, err := e.admin.Complete(ctx, j.ID, j.LeaseToken, json.RawMessage(`{"total":42}`)); err != nil {
		t.Fatal(err)
	}
	rec, err := e.admin.GetRecord(ctx, "order-1")
	if err != nil || rec.Status != "completed" || rec.JobID != j.ID || rec.ResultHash == "" || rec.Result != nil || rec.CompletedAt == nil {
		t.Fatalf("record: %+v %v", rec, err)
	}
	rec, err = e.admin.GetRecordResult(ctx, "order-1")
	if err != nil || string(rec.Result) != `{"total":42}` {
		t.Fatalf("record with result: %+v %v", rec, err)
	}
	if _, err := e.admin.GetRecord(ctx, "nope"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
	if err := e.admin.DeleteRecord(ctx, "nope"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete missing record: %v", err)
	}

	// A lease: run, renew, complete; the next caller gets the result.
	l, err := e.admin.LeaseAcquire(ctx, "report-7", time.Minute, time.Hour)
	if err != nil || !l.Acquired || l.Cached || l.LeaseToken == "" || l.LeaseExpiresAt == nil {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	until, err := e.admin.LeaseRenew(ctx, "report-7", l.LeaseToken, time.Hour)
	if err != nil || !until.After(*l.LeaseExpiresAt) {
		t.Fatalf("renew: %v %v", until, err)
	}
	if _, err := e.admin.LeaseRenew(ctx, "report-7", "wrong", time.Hour); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("renew with a wrong token: %v", err)
	}
	if _, err := e.admin.LeaseComplete(ctx, "report-7", l.LeaseToken, json.RawMessage(`{"rows":3}`), 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c, err := e.admin.LeaseAcquire(ctx, "report-7", 0, 0)
	if err != nil || c.Acquired || !c.Cached || string(c.Result) != `{"rows":3}` || c.DurationMS == nil || *c.DurationMS != 1500 {
		t.Fatalf("cached: %+v %v", c, err)
	}
	// A released lease caches nothing: the next caller runs the work.
	l, err = e.admin.LeaseAcquire(ctx, "flaky", time.Minute, 0)
	if err != nil || !l.Acquired {
		t.Fatal(l, err)
	}
	if err := e.admin.LeaseRelease(ctx, "flaky", l.LeaseToken); err != nil {
		t.Fatal(err)
	}
	if l2, err := e.admin.LeaseAcquire(ctx, "flaky", time.Minute, 0); err != nil || !l2.Acquired || l2.LeaseToken == l.LeaseToken {
		t.Fatalf("after release: %+v %v", l2, err)
	}

	st, err := e.admin.RecordStats(ctx)
	if err != nil || st.Entries < 2 || st.Completed < 2 || st.InProgress < 1 {
		t.Fatalf("record stats: %+v %v", st, err)
	}
	if err := e.admin.DeleteRecord(ctx, "order-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetRecord(ctx, "order-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted record: %v", err)
	}
}

func TestLimitsAndPauses(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	queue := idemclient.LimitScope{Queue: "mail"}
	tenant := idemclient.LimitScope{Tenant: "acme"}
	both := idemclient.LimitScope{Tenant: "acme", Queue: "sms"}

	l, err := e.admin.LimitPut(ctx, queue, idemclient.LimitRequest{Rate: ptr("100/1m"), Concurrency: ptr(5)})
	if err != nil || l.Queue != "mail" || l.Tenant != "" || l.Rate != "100/1m" || l.Concurrency != 5 {
		t.Fatalf("put queue limit: %+v %v", l, err)
	}
	if _, err := e.admin.LimitPut(ctx, tenant, idemclient.LimitRequest{Weight: ptr(3)}); err != nil {
		t.Fatal(err)
	}
	if l, err := e.admin.LimitPut(ctx, both, idemclient.LimitRequest{Concurrency: ptr(1)}); err != nil || l.Tenant != "acme" || l.Queue != "sms" {
		t.Fatalf("put tenant-in-queue limit: %+v %v", l, err)
	}
	if _, err := e.admin.LimitPut(ctx, queue, idemclient.LimitRequest{Rate: ptr("lots")}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("bad rate: %v", err)
	}
	if _, err := e.admin.LimitPut(ctx, queue, idemclient.LimitRequest{Weight: ptr(2)}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("weight on a queue: %v", err)
	}
	got, err := e.admin.LimitGet(ctx, both)
	if err != nil || got.Concurrency != 1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	list, err := e.admin.LimitList(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := e.admin.LimitDelete(ctx, both); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.LimitGet(ctx, both); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted limit: %v", err)
	}
	if err := e.admin.LimitDelete(ctx, both); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}

	// A paused queue is not claimed from until resumed.
	p, err := e.admin.QueuePause(ctx, "mail", "")
	if err != nil || !p.Paused || p.Queue != "mail" || p.Tenant != "" {
		t.Fatalf("pause: %+v %v", p, err)
	}
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "mail"})
	if jobs, err := e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"mail"}, WorkerID: "w"}); err != nil || len(jobs) != 0 {
		t.Fatalf("claim from a paused queue: %v %v", jobs, err)
	}
	st, err := e.admin.Stats(ctx)
	if err != nil || len(st.Paused) != 1 || st.Paused[0].Queue != "mail" {
		t.Fatalf("stats paused: %+v %v", st, err)
	}
	if p, err := e.admin.QueueResume(ctx, "mail", ""); err != nil || p.Paused {
		t.Fatalf("resume: %+v %v", p, err)
	}
	if jobs, err := e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"mail"}, WorkerID: "w"}); err != nil || len(jobs) != 1 {
		t.Fatalf("claim after resume: %v %v", jobs, err)
	}
	// One tenant's work paused.
	if p, err := e.admin.QueuePause(ctx, "mail", "acme"); err != nil || p.Tenant != "acme" {
		t.Fatalf("pause acme: %+v %v", p, err)
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	s, err := e.admin.PutSchedule(ctx, "nightly", &idemclient.ScheduleRequest{Cron: "0 3 * * *", Timezone: "Europe/Paris",
		Queue: "reports", Kind: "report", Args: json.RawMessage(`{"full":true}`)})
	if err != nil || s.Name != "nightly" || s.Cron != "0 3 * * *" || s.Timezone != "Europe/Paris" || s.NextFireAt == nil || s.LastFiredAt != nil {
		t.Fatalf("put: %+v %v", s, err)
	}
	if _, err := e.admin.PutSchedule(ctx, "hourly", &idemclient.ScheduleRequest{Every: ptr("1h"), Kind: "tick"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutSchedule(ctx, "bad", &idemclient.ScheduleRequest{Cron: "61 * * * *", Kind: "k"}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("bad cron: %v", err)
	}
	if _, err := e.admin.PutSchedule(ctx, "fast", &idemclient.ScheduleRequest{Every: ptr("1s"), Kind: "k"}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("every 1s: %v", err)
	}
	list, err := e.admin.ListSchedules(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "hourly" || list[1].Name != "nightly" {
		t.Fatalf("list: %+v %v", list, err)
	}
	first, err := e.admin.TriggerSchedule(ctx, "nightly", "manual-1")
	if err != nil || first.Existing || first.Job.Kind != "report" || first.Job.Queue != "reports" {
		t.Fatalf("trigger: %+v %v", first, err)
	}
	again, err := e.admin.TriggerSchedule(ctx, "nightly", "manual-1")
	if err != nil || !again.Existing || again.Job.ID != first.Job.ID {
		t.Fatalf("trigger with the same key: %+v %v", again, err)
	}
	other, err := e.admin.TriggerSchedule(ctx, "nightly", "")
	if err != nil || other.Job.ID == first.Job.ID {
		t.Fatalf("trigger without a key: %+v %v", other, err)
	}
	got, err := e.admin.GetSchedule(ctx, "nightly")
	if err != nil || got.LastJobID != other.Job.ID {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := e.admin.DeleteSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetSchedule(ctx, "nightly"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	if _, err := e.admin.TriggerSchedule(ctx, "nightly", ""); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("trigger deleted: %v", err)
	}
	// The jobs it made are kept.
	if j, err := e.admin.GetJob(ctx, first.Job.ID); err != nil || j.ID != first.Job.ID {
		t.Fatalf("job of a deleted schedule: %v", err)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	tg, created, err := e.admin.PutTarget(ctx, "orders", &idemclient.TargetPut{URL: "http://127.0.0.1:9/hook", Queue: "hooks", Timeout: ptr("5s")})
	if err != nil || !created || tg.Secret == "" || tg.SecretCount != 1 || tg.Timeout != "5s" {
		t.Fatalf("create: %+v %v %v", tg, created, err)
	}
	tg, created, err = e.admin.PutTarget(ctx, "orders", &idemclient.TargetPut{URL: "http://127.0.0.1:9/v2", Queue: "hooks", Secrets: &[]string{}})
	if err != nil || created || tg.Secret != "" || tg.SecretCount != 0 || tg.URL != "http://127.0.0.1:9/v2" {
		t.Fatalf("replace: %+v %v %v", tg, created, err)
	}
	if _, _, err := e.admin.PutTarget(ctx, "nowhere", &idemclient.TargetPut{URL: "http://127.0.0.1:9/"}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("target without queue or kind: %v", err)
	}
	list, err := e.admin.Targets(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "orders" || list[0].Secret != "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := e.admin.DeleteTarget(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.DeleteTarget(ctx, "orders"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestTopics(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	sub, created, err := e.admin.PutSubscription(ctx, "orders", "billing", &idemclient.SubscriptionPut{URL: "http://127.0.0.1:9/b", EventTypes: []string{"order.paid"}})
	if err != nil || !created || sub.Secret == "" || sub.Topic != "orders" || len(sub.EventTypes) != 1 {
		t.Fatalf("subscribe: %+v %v %v", sub, created, err)
	}
	if _, created, err := e.admin.PutSubscription(ctx, "orders", "billing", &idemclient.SubscriptionPut{URL: "http://127.0.0.1:9/b2", Secret: ptr("")}); err != nil || created {
		t.Fatalf("replace: %v %v", created, err)
	}
	subs, err := e.admin.Subscriptions(ctx, "orders")
	if err != nil || len(subs) != 1 || subs[0].URL != "http://127.0.0.1:9/b2" {
		t.Fatalf("subscriptions: %+v %v", subs, err)
	}

	var ids []string
	for i, typ := range []string{"order.paid", "order.shipped", "order.paid"} {
		r, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Type: typ, PartitionKey: "o-1",
			Payload: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)})
		if err != nil || r.EventID == "" || r.Deliveries != 1 {
			t.Fatalf("publish %d: %+v %v", i, r, err)
		}
		ids = append(ids, r.EventID)
	}
	k1, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Key: "evt-1", Payload: json.RawMessage(`{}`)})
	if err != nil || k1.Existing {
		t.Fatalf("keyed publish: %+v %v", k1, err)
	}
	k2, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Key: "evt-1", Payload: json.RawMessage(`{}`)})
	if err != nil || !k2.Existing || k2.EventID != k1.EventID {
		t.Fatalf("keyed publish again: %+v %v", k2, err)
	}

	// Pages of 2, oldest first.
	evs, cursor, err := e.admin.Events(ctx, "orders", "", nil, 2, "")
	if err != nil || len(evs) != 2 || cursor == "" || evs[0].ID != ids[0] || evs[1].ID != ids[1] {
		t.Fatalf("page 1: %+v %q %v", evs, cursor, err)
	}
	evs, cursor, err = e.admin.Events(ctx, "orders", "", nil, 2, cursor)
	if err != nil || len(evs) != 2 || evs[0].ID != ids[2] || evs[1].ID != k1.EventID || cursor != "" {
		t.Fatalf("page 2: %+v %q %v", evs, cursor, err)
	}
	evs, _, err = e.admin.Events(ctx, "orders", "o-1", []string{"order.shipped"}, 0, "")
	if err != nil || len(evs) != 1 || evs[0].ID != ids[1] || evs[0].PartitionKey != "o-1" || evs[0].CreatedAt.IsZero() {
		t.Fatalf("by partition and type: %+v %v", evs, err)
	}
	evs, _, err = e.admin.Events(ctx, "orders", "", []string{"order.paid", "order.shipped"}, 0, "")
	if err != nil || len(evs) != 3 {
		t.Fatalf("two types: %d events %v", len(evs), err)
	}

	rep, err := e.admin.ReplayEvents(ctx, "orders", &idemclient.EventReplayRequest{PartitionKey: "o-1", Types: []string{"order.paid"}})
	if err != nil || rep.Events != 2 || rep.Deliveries != 2 {
		t.Fatalf("replay: %+v %v", rep, err)
	}
	if err := e.admin.DeleteSubscription(ctx, "orders", "billing"); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.DeleteSubscription(ctx, "orders", "billing"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Payload: json.RawMessage(`{"a":`)}); err == nil {
		t.Fatal("published broken JSON")
	}
}

func TestBatchCancel(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	b, err := e.admin.BatchCreate(ctx, "import-9", nil, []*idemclient.EnqueueRequest{
		{Kind: "row", Queue: "imp", Args: json.RawMessage(`{"row":1}`)}, {Kind: "row", Queue: "imp", Args: json.RawMessage(`{"row":2}`)}})
	if err != nil {
		t.Fatal(err)
	}
	j := e.claimOne(e.admin, "imp")
	if _, err := e.admin.Complete(ctx, j.ID, j.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	if b.Batch.Total != 2 || b.Batch.Finished {
		t.Fatalf("create: %+v", b.Batch)
	}
	got, err := e.admin.BatchCancel(ctx, b.Batch.ID)
	if err != nil || got.Counts["completed"] != 1 || got.Counts["cancelled"] != 1 || !got.Finished || len(got.Jobs) != 2 {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	if _, err := e.admin.BatchGet(ctx, "123456"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("missing batch: %v", err)
	}
}

func TestReadyAndHealth(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	if err := e.admin.Health(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.admin.Ready(ctx)
	if err != nil || r.Status == "" || len(r.Checks) == 0 {
		t.Fatalf("ready: %+v %v", r, err)
	}
	h, err := e.admin.HealthChecks(ctx)
	if err != nil || h.Status != "healthy" || len(h.Checks) == 0 {
		t.Fatalf("health: %+v %v", h, err)
	}
	// An unreachable server is an error, not a panic or a hang.
	e2, err := idemclient.New("http://127.0.0.1:1", &idemclient.Config{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Health(ctx); err == nil {
		t.Fatal("health of a closed port")
	}
}
