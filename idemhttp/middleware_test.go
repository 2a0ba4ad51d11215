package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// mwServer serves h behind the middleware on its own SQLite file.
func mwServer(t *testing.T, cfg *idemhttp.MiddlewareConfig, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	st := openSQLite(t)
	srv := httptest.NewServer(idemhttp.Middleware(st, cfg)(h))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, key, body string, hdr ...string) *resp {
	t.Helper()
	r, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &resp{status: res.StatusCode, header: res.Header, body: b}
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	t.Run("replays status headers and body", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Order", "o-1")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, string(b)+"#"+string(rune('0'+n)))
		})
		r1 := post(t, srv.URL+"/orders", "k1", "pay")
		r2 := post(t, srv.URL+"/orders", "k1", "pay")
		if r1.status != 201 || r2.status != 201 || string(r2.body) != "pay#1" || r2.header.Get("X-Order") != "o-1" ||
			r2.header.Get("Idempotent-Replayed") != "true" || r1.header.Get("Idempotent-Replayed") != "" || calls.Load() != 1 {
			t.Fatalf("r1 %d %s, r2 %d %s %v, calls %d", r1.status, r1.body, r2.status, r2.body, r2.header, calls.Load())
		}
		expect(t, post(t, srv.URL+"/orders", "k1", "other"), 422, "/problems/idempotency-key-reused")
		expect(t, post(t, srv.URL+"/refunds", "k1", "pay"), 422, "/problems/idempotency-key-reused")
		// No key: passes through; GET: passes through.
		if r := post(t, srv.URL+"/orders", "", "x"); r.status != 201 || calls.Load() != 2 {
			t.Fatal("no-key request not passed through")
		}
		get, _ := http.NewRequest("GET", srv.URL+"/orders", nil)
		get.Header.Set("Idempotency-Key", "k1")
		res, err := http.DefaultClient.Do(get)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 201 || res.Header.Get("Idempotent-Replayed") != "" || calls.Load() != 3 {
			t.Fatalf("GET with a key not passed through: %d, calls %d", res.StatusCode, calls.Load())
		}
		expect(t, post(t, srv.URL+"/orders", strings.Repeat("x", 300), "x"), 400, "/problems/invalid-request")
	})
	t.Run("409 while in flight", func(t *testing.T) {
		t.Parallel()
		entered, release := make(chan struct{}), make(chan struct{})
		srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			io.WriteString(w, "done")
		})
		first := make(chan *resp, 1)
		go func() { first <- post(t, srv.URL, "k", "b") }()
		<-entered
		r := post(t, srv.URL, "k", "b")
		expect(t, r, 409, "/problems/idempotency-key-in-progress")
		if r.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
		expect(t, post(t, srv.URL, "k", "different"), 422, "/problems/idempotency-key-reused")
		close(release)
		if r := <-first; r.status != 200 || string(r.body) != "done" {
			t.Fatalf("first %d %s", r.status, r.body)
		}
		if r := post(t, srv.URL, "k", "b"); string(r.body) != "done" || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("not replayed after completion")
		}
	})
	t.Run("5xx and panic release the key", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
			switch calls.Add(1) {
			case 1:
				w.WriteHeader(http.StatusBadGateway)
			case 2:
				panic(http.ErrAbortHandler)
			default:
				io.WriteString(w, "ok")
			}
		})
		if r := post(t, srv.URL, "k", "b"); r.status != 502 {
			t.Fatalf("first %d", r.status)
		}
		r, _ := http.NewRequest("POST", srv.URL, strings.NewReader("b"))
		r.Header.Set("Idempotency-Key", "k")
		if res, err := http.DefaultClient.Do(r); err == nil {
			res.Body.Close() // the panic aborts the connection
		}
		if r := post(t, srv.URL, "k", "b"); r.status != 200 || string(r.body) != "ok" || calls.Load() != 3 {
			t.Fatalf("after release: %d %s calls %d", r.status, r.body, calls.Load())
		}
		if r := post(t, srv.URL, "k", "b"); r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 3 {
			t.Fatal("success not stored")
		}
	})
	t.Run("required key, policy and tenants", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		cfg := &idemhttp.MiddlewareConfig{Required: true, TTL: time.Hour,
			Keep:   func(status int) bool { return status < 400 },
			Tenant: func(r *http.Request) string { return r.Header.Get("X-Tenant") }}
		srv := mwServer(t, cfg, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if r.URL.Path == "/bad" {
				w.WriteHeader(http.StatusBadRequest)
			}
		})
		expect(t, post(t, srv.URL, "", "b"), 400, "/problems/idempotency-key-missing")
		post(t, srv.URL+"/bad", "k", "b", "X-Tenant", "t1")
		post(t, srv.URL+"/bad", "k", "b", "X-Tenant", "t1")
		if calls.Load() != 2 {
			t.Fatalf("4xx stored against the policy: calls %d", calls.Load())
		}
		post(t, srv.URL, "k2", "b", "X-Tenant", "t1")
		r := post(t, srv.URL, "k2", "b", "X-Tenant", "t2")
		if r.header.Get("Idempotent-Replayed") != "" || calls.Load() != 4 {
			t.Fatal("records are not scoped by tenant")
		}
	})
}
