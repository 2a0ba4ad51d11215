package idemhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

// startTogether runs fn(g) on n goroutines released together by one
// channel and waits for all of them.
func startTogether(n int, fn func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Go(func() {
			<-start
			fn(g)
		})
	}
	close(start)
	wg.Wait()
}

// testPullRace: six pull workers claim, fail and complete 120 jobs over
// HTTP. Every fourth job fails its first attempt with retry_after 0s, so
// its second attempt is claimable at once, racing the others' claims.
// Overlap: the workers start together on a channel and claim in a loop
// until every job is completed. Each (job, attempt) is claimed exactly
// once; the failed jobs twice in all, the others once; each job is
// completed once and ends completed.
func testPullRace(t *testing.T, open opener) {
	e := setup(t, open, nil)
	const n, workers = 120, 6
	jobs := make([]map[string]any, n)
	for i := range jobs {
		jobs[i] = map[string]any{"kind": "pull", "queue": "race", "args": map[string]any{"i": i}}
	}
	expect(t, e.req("POST", "/v1/jobs/batch", e.keyA, map[string]any{"jobs": jobs}), 200, "")
	var (
		mu        sync.Mutex
		claimed   = map[string]int{} // "id/attempt" → claims
		attempts  = map[string]int{} // id → claims
		completed = map[string]int{}
		left      atomic.Int32
	)
	left.Store(n)
	deadline := time.Now().Add(60 * time.Second)
	startTogether(workers, func(g int) {
		for left.Load() > 0 {
			if time.Now().After(deadline) {
				t.Errorf("worker %d: %d jobs still not completed", g, left.Load())
				return
			}
			r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"race"},
				"worker_id": fmt.Sprint("w", g), "limit": 5, "lease": "30s"})
			if r.status != 200 {
				t.Errorf("worker %d: claim %d %s", g, r.status, r.body)
				return
			}
			for _, x := range r.json(t)["jobs"].([]any) {
				j := x.(map[string]any)
				id, tok, att := j["id"].(string), j["lease_token"], int(j["attempt"].(float64))
				mu.Lock()
				claimed[fmt.Sprint(id, "/", att)]++
				attempts[id]++
				mu.Unlock()
				i := int(j["args"].(map[string]any)["i"].(float64))
				path, body := "/complete", map[string]any{"lease_token": tok, "result": map[string]any{"by": g}}
				if i%4 == 0 && att == 1 {
					path, body = "/fail", map[string]any{"lease_token": tok, "error": "again", "retry_after": "0s"}
				}
				if r := e.req("POST", "/v1/jobs/"+id+path, e.keyA, body); r.status != 200 {
					t.Errorf("worker %d: %s of job %s: %d %s", g, path, id, r.status, r.body)
					return
				}
				if path == "/complete" {
					mu.Lock()
					completed[id]++
					mu.Unlock()
					left.Add(-1)
				}
			}
		}
	})
	if t.Failed() {
		return
	}
	for k, c := range claimed {
		if c != 1 {
			t.Errorf("job/attempt %s claimed %d times", k, c)
		}
	}
	if len(completed) != n {
		t.Errorf("%d jobs completed, want %d", len(completed), n)
	}
	for id, c := range completed {
		if c != 1 {
			t.Errorf("job %s completed %d times", id, c)
		}
		j := e.req("GET", "/v1/jobs/"+id, e.keyA, nil).json(t)
		i := int(j["args"].(map[string]any)["i"].(float64))
		want := 1
		if i%4 == 0 {
			want = 2
		}
		if j["state"] != "completed" || attempts[id] != want || j["attempt"] != float64(want) {
			t.Errorf("job %s (i=%d): %v after %d claims, attempt %v: want completed after %d", id, i, j["state"], attempts[id], j["attempt"], want)
		}
	}
}

// TestMiddlewareRace (both stores): 16 clients send the same POST with
// each of 3 keys, each client in its own key order. Overlap: the clients
// start together on a channel. The handler runs once per key; each answer
// is that run's response (once fresh, else replayed) or a 409 while it is
// in flight, and a 409 asked again after the run gets the replay.
func TestMiddlewareRace(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "postgres" {
				dbtest.PostgresURL(t) // skips loudly without a server
			}
			testMiddlewareRace(t, open)
		})
	}
}

func testMiddlewareRace(t *testing.T, open opener) {
	const clients, keys = 16, 3
	var calls [keys]atomic.Int32
	st := open(t)
	srv := httptest.NewServer(idemhttp.Middleware(st, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k := int(body[len(body)-1] - '0')
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d run %d", k, calls[k].Add(1))
	})))
	t.Cleanup(srv.Close)
	var (
		mu      sync.Mutex
		fresh   [keys]int
		bodies  [keys]map[string]int
		retried int
	)
	deadline := time.Now().Add(60 * time.Second)
	startTogether(clients, func(g int) {
		for i := range keys {
			k := (g + i) % keys
			r := post(t, srv.URL+"/orders", fmt.Sprint("order-", k), fmt.Sprint("pay ", k))
			for r.status == http.StatusConflict && time.Now().Before(deadline) {
				mu.Lock()
				retried++
				mu.Unlock()
				r = post(t, srv.URL+"/orders", fmt.Sprint("order-", k), fmt.Sprint("pay ", k))
			}
			if r.status != http.StatusCreated {
				t.Errorf("client %d, key %d: %d %s", g, k, r.status, r.body)
				return
			}
			mu.Lock()
			if r.header.Get("Idempotent-Replayed") != "true" {
				fresh[k]++
			}
			if bodies[k] == nil {
				bodies[k] = map[string]int{}
			}
			bodies[k][string(r.body)]++
			mu.Unlock()
		}
	})
	for k := range keys {
		want := fmt.Sprintf("order %d run 1", k)
		if c := calls[k].Load(); c != 1 {
			t.Errorf("key %d: handler ran %d times, want 1", k, c)
		}
		if fresh[k] != 1 || len(bodies[k]) != 1 || bodies[k][want] != clients {
			t.Errorf("key %d: %d fresh answers, bodies %v: want 1 and %d × %q", k, fresh[k], bodies[k], clients, want)
		}
	}
	t.Logf("%d answers were 409 and asked again", retried)
}
