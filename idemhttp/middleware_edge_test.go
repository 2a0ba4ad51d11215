package idemhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

// mwServerOn serves h behind the middleware on a fresh store of open.
func mwServerOn(t *testing.T, open opener, cfg *idemhttp.MiddlewareConfig, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(idemhttp.Middleware(open(t), cfg)(h))
	t.Cleanup(srv.Close)
	return srv
}

func TestMiddlewareEdgesSQLite(t *testing.T) {
	t.Parallel()
	testMiddlewareEdges(t, openSQLite)
}

func TestMiddlewareEdgesPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t) // skips loudly without a server
	testMiddlewareEdges(t, openPostgres)
}

func testMiddlewareEdges(t *testing.T, open opener) {
	// Many concurrent requests with one key: the handler runs once, every
	// other request is a 409 or the stored answer, and every answer after
	// the first ends is that answer, byte for byte.
	t.Run("concurrent requests with one key run the handler once", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServerOn(t, open, nil, func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			w.Header().Set("X-Charge", fmt.Sprint(n))
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, "charge %d", n)
		})
		const n = 16
		out := make([]*resp, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = post(t, srv.URL+"/pay", "k", "amount=1")
			}()
		}
		wg.Wait()
		for i, r := range out {
			if r.status != 409 && (r.status != 201 || string(r.body) != "charge 1" || r.header.Get("X-Charge") != "1") {
				t.Errorf("answer %d: %d %q %v", i, r.status, r.body, r.header)
			}
		}
		if r := post(t, srv.URL+"/pay", "k", "amount=1"); r.status != 201 || string(r.body) != "charge 1" || r.header.Get("X-Charge") != "1" {
			t.Errorf("after: %d %q %v", r.status, r.body, r.header)
		}
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", calls.Load())
		}
	})

	// The query is part of the request: the same key with another query is
	// another request (422), not a replay of the first one's answer.
	t.Run("another query with the key is refused", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServerOn(t, open, nil, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			_, _ = io.WriteString(w, "amount "+r.URL.Query().Get("amount"))
		})
		if r := post(t, srv.URL+"/pay?amount=1", "k", ""); string(r.body) != "amount 1" {
			t.Fatalf("first: %d %q", r.status, r.body)
		}
		expect(t, post(t, srv.URL+"/pay?amount=2", "k", ""), 422, "/problems/idempotency-key-reused")
		// An escaped path is not the path it decodes to.
		expect(t, post(t, srv.URL+"/pay%3Famount=1", "k", ""), 422, "/problems/idempotency-key-reused")
		if r := post(t, srv.URL+"/pay?amount=1", "k", ""); string(r.body) != "amount 1" || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %q %v", r.status, r.body, r.header)
		}
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", calls.Load())
		}
	})

	// A handler that hijacks the connection answers on it itself: the
	// middleware saw no answer and must not store one (it stored an empty
	// 200, replayed to every retry): the key is released and a retry runs.
	t.Run("a hijacked request stores nothing", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		// served tells when the middleware has returned (the key released):
		// the hijacked answer reaches the client before that.
		served := make(chan struct{}, 2)
		mw := idemhttp.Middleware(open(t), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) > 1 {
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, "plain")
				return
			}
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			defer conn.Close()
			_, _ = buf.WriteString("HTTP/1.1 202 Accepted\r\nContent-Length: 3\r\nConnection: close\r\n\r\nraw")
			_ = buf.Flush()
		}))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mw.ServeHTTP(w, r)
			served <- struct{}{}
		}))
		t.Cleanup(srv.Close)
		if r := post(t, srv.URL+"/x", "k", ""); r.status != 202 || string(r.body) != "raw" {
			t.Fatalf("hijacked answer: %d %q", r.status, r.body)
		}
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			t.Fatal("the hijacked request never ended")
		}
		r := post(t, srv.URL+"/x", "k", "")
		if r.status != 201 || string(r.body) != "plain" || calls.Load() != 2 {
			t.Fatalf("retry after a hijack: %d %q %v, %d calls; want the handler to run again", r.status, r.body, r.header, calls.Load())
		}
	})

	// A streaming handler finds an http.Flusher (the common type
	// assertion, not only http.ResponseController); a flush before any
	// write sends and stores the 200 with the headers set so far.
	t.Run("a streaming handler flushes through the middleware", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServerOn(t, open, nil, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			f, ok := w.(http.Flusher)
			if !ok {
				http.Error(w, "streaming unsupported", http.StatusNotImplemented)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			f.Flush()
			w.Header().Set("X-Late", "set after the flush: never sent")
			for i := range 3 {
				_, _ = fmt.Fprintf(w, "data: %d\n\n", i)
				f.Flush()
			}
		})
		r1 := post(t, srv.URL+"/events", "k", "")
		r2 := post(t, srv.URL+"/events", "k", "")
		want := "data: 0\n\ndata: 1\n\ndata: 2\n\n"
		if r1.status != 200 || string(r1.body) != want || r1.header.Get("X-Late") != "" {
			t.Fatalf("first: %d %q %v", r1.status, r1.body, r1.header)
		}
		if r2.status != 200 || string(r2.body) != want || r2.header.Get("Idempotent-Replayed") != "true" ||
			r2.header.Get("Content-Type") != "text/event-stream" || r2.header.Get("X-Late") != "" || calls.Load() != 1 {
			t.Fatalf("replay: %d %q %v, %d calls", r2.status, r2.body, r2.header, calls.Load())
		}
	})

	// The replay of an answer with trailers carries them.
	t.Run("trailers are stored and replayed", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServerOn(t, open, nil, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Trailer", "X-Checksum")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Checksum", "c1")
			w.Header().Set(http.TrailerPrefix+"X-Undeclared", "u1")
		})
		for i := range 2 {
			req, _ := http.NewRequest("POST", srv.URL+"/t", nil)
			req.Header.Set("Idempotency-Key", "k")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(bufio.NewReader(res.Body))
			res.Body.Close()
			if string(b) != "body" || res.Trailer.Get("X-Checksum") != "c1" || res.Trailer.Get("X-Undeclared") != "u1" {
				t.Errorf("answer %d: %q trailers %v header %v", i, b, res.Trailer, res.Header)
			}
		}
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", calls.Load())
		}
	})

	// A client that goes away mid-handler: the handler's answer is still
	// stored, and the retry gets it.
	t.Run("the answer of a request whose client left is replayed", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		entered, gone := make(chan struct{}), make(chan struct{})
		srv := mwServerOn(t, open, nil, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			close(entered)
			<-r.Context().Done() // the client left
			<-gone
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "made")
		})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/x", strings.NewReader("b"))
		req.Header.Set("Idempotency-Key", "k")
		errc := make(chan error, 1)
		go func() {
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
			}
			errc <- err
		}()
		<-entered
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("the cancelled request got an answer")
		}
		close(gone)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := post(t, srv.URL+"/x", "k", "b")
			if r.status == 201 {
				if string(r.body) != "made" || r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
					t.Fatalf("retry: %d %q %v, %d calls", r.status, r.body, r.header, calls.Load())
				}
				break
			}
			if r.status != 409 || time.Now().After(deadline) {
				t.Fatalf("retry: %d %q", r.status, r.body)
			}
		}
	})

	// A binary body of the largest stored size, with a Content-Encoding, is
	// replayed byte for byte.
	t.Run("a large binary answer is replayed byte for byte", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		payload := make([]byte, idemhttp.DefaultMaxResponseBytes)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		srv := mwServerOn(t, open, nil, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(payload[:1000])
			_, _ = w.Write(payload[1000:])
		})
		r1 := post(t, srv.URL+"/blob", "k", "", "Accept-Encoding", "gzip")
		r2 := post(t, srv.URL+"/blob", "k", "", "Accept-Encoding", "gzip")
		if !bytes.Equal(r1.body, payload) || !bytes.Equal(r2.body, payload) || r2.header.Get("Content-Encoding") != "gzip" ||
			r2.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
			t.Fatalf("replay: %d bytes %v, %d calls", len(r2.body), r2.header, calls.Load())
		}
	})

	// A 101 sent without taking the connection is no answer to replay: the
	// retry runs the handler again.
	t.Run("a 101 is not stored", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServerOn(t, open, nil, func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				w.Header().Set("Upgrade", "demo")
				w.WriteHeader(http.StatusSwitchingProtocols)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		req, _ := http.NewRequest("POST", srv.URL+"/up", nil)
		req.Header.Set("Idempotency-Key", "k")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
		if r := post(t, srv.URL+"/up", "k", ""); r.status != 201 || calls.Load() != 2 {
			t.Fatalf("retry after a 101: %d %v, %d calls; want the handler to run again", r.status, r.header, calls.Load())
		}
	})

	// Malformed keys are 400 and run nothing; a quoted key of the longest
	// length is taken.
	t.Run("key forms", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServerOn(t, open, nil, counting(&calls, 201, "made"))
		for _, k := range []string{"", `""`, strings.Repeat("k", 256), "cl\u00e9", "caf\xc3\xa9"} {
			expect(t, post(t, srv.URL+"/x", "", "", "Idempotency-Key", k), 400, "/problems/invalid-request")
		}
		long := strings.Repeat("k", 255)
		post(t, srv.URL+"/x", `"`+long+`"`, "")
		if r := post(t, srv.URL+"/x", long, ""); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
			t.Fatalf("a 255-character key: %d %v, %d calls", r.status, r.header, calls.Load())
		}
	})
}
