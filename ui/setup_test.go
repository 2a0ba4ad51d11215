package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
	"github.com/idem-dev/idem/ui"
)

// env is a real idem server (API + dashboard) on 127.0.0.1 over a fresh
// SQLite store, with an admin key and two tenant keys.
type env struct {
	t     *testing.T
	st    store.Store
	srv   *httptest.Server
	api0  *idemhttp.Server // the API the dashboard calls
	admin string           // admin key, tenant default
	keyA  string           // tenant "a"
	keyB  string           // tenant "b"
}

func setup(t *testing.T) *env {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	api, err := idemhttp.NewServer(client, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(api, &ui.Config{Refresh: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, api0: api}
	e.admin = e.newKey("default", true)
	e.keyA = e.newKey("a", false)
	e.keyB = e.newKey("b", false)
	return e
}

func (e *env) newKey(tenant string, admin bool) string {
	e.t.Helper()
	secret, k := idemhttp.NewAPIKey(tenant, admin, "test", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// api is an HTTP API client acting with key.
func (e *env) api(key string) *idemclient.Client {
	e.t.Helper()
	cl, err := idemclient.New(e.srv.URL, &idemclient.Config{APIKey: key, MaxRetries: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	return cl
}

// enqueue creates a job and returns its id.
func (e *env) enqueue(key, queue, kind string, args any) string {
	e.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.api(key).Enqueue(context.Background(), &idemclient.EnqueueRequest{Queue: queue, Kind: kind, Args: raw})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Job.ID
}

// dead makes a job of queue die after two failed attempts and returns its id.
func (e *env) dead(key, queue string) string {
	e.t.Helper()
	ctx := context.Background()
	cl := e.api(key)
	res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: queue, Kind: "charge", MaxAttempts: 2,
		Args: json.RawMessage(`{"customer":"dying"}`), IdempotencyKey: "dead-" + queue})
	if err != nil {
		e.t.Fatal(err)
	}
	zero := time.Duration(0)
	for i, msg := range []string{"first: connection refused", "second: boom\n  at charge.go:42"} {
		jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{queue}, WorkerID: "w-test"})
		if err != nil || len(jobs) != 1 || jobs[0].ID != res.Job.ID {
			e.t.Fatalf("claim %d: %v %v", i, jobs, err)
		}
		if _, err := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, &idemclient.FailRequest{Error: msg, RetryAfter: &zero}); err != nil {
			e.t.Fatal(err)
		}
	}
	j, err := cl.GetJob(ctx, res.Job.ID)
	if err != nil || j.State != "dead" {
		e.t.Fatalf("job %s: %+v %v, want dead", res.Job.ID, j, err)
	}
	return j.ID
}

// worker claims jobs of queue with key and completes each, sending its id on
// done, until ctx ends.
func (e *env) worker(ctx context.Context, key, queue string) <-chan string {
	done := make(chan string, 16)
	cl := e.api(key)
	go func() {
		for ctx.Err() == nil {
			jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{queue}, WorkerID: "w-ui", Wait: 2 * time.Second})
			if err != nil {
				continue
			}
			for _, j := range jobs {
				if _, err := cl.Complete(ctx, j.ID, j.LeaseToken, json.RawMessage(`{"ok":true}`)); err == nil {
					done <- j.ID
				}
			}
		}
	}()
	return done
}

// get fetches a dashboard path with a plain HTTP client and cookies.
func (e *env) get(path string, cookies ...*http.Cookie) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	res, err := (&http.Transport{}).RoundTrip(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return res
}
