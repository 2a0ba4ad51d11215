package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/sqlitetest"
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
	return newAPIWith(t, nil, wrap)
}

// newAPIWith is newAPI with the server configured by cfg (nil: defaults);
// its Logger is replaced by a silent one.
func newAPIWith(t *testing.T, cfg *idemhttp.Config, wrap func(http.Handler) http.Handler) *apiEnv {
	t.Helper()
	var scfg idemhttp.Config
	if cfg != nil {
		scfg = *cfg
	}
	scfg.Logger = slog.New(slog.DiscardHandler)
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	engine, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(engine, st, &scfg)
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
