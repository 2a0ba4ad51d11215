package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBenchConn: the raw load generator sends what net/http's server reads
// as the request it means, and reads every framing of a reply the
// server may send: Content-Length, chunked, and a body ended by
// Connection: close (after which it dials again).
func TestBenchConn(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 10000) // above net/http's buffer: chunked
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		if r.Method != http.MethodPost || r.URL.Path != "/base/v1/jobs" || r.Header.Get("Authorization") != "Bearer sec" ||
			r.Header.Get("Content-Type") != "application/json" || string(body) != `{"k":"`+key+`"}` {
			http.Error(w, fmt.Sprintf("unexpected request %s %s %q %q", r.Method, r.URL.Path, r.Header, body), 500)
			return
		}
		switch key {
		case "chunked":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/v1/jobs/7")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"job":{"id":"7","pad":%q}}`, big)
		case "close":
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"status":409}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/v1/jobs/12")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, `{"job":{"id":"12"},"existing":true}`)
		}
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c, err := dialBench(ctx, srv.URL+"/base/", "sec")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	for _, tc := range []struct {
		key    string
		status int
		body   string
	}{
		{"plain", 200, `{"job":{"id":"12"},"existing":true}`},
		{"chunked", 201, `{"job":{"id":"7","pad":"` + big + `"}}`},
		{"close", 409, `{"status":409}`},
		{"plain", 200, `{"job":{"id":"12"},"existing":true}`}, // on a new connection
	} {
		rep, err := c.send(ctx, []byte(tc.key), []byte(`{"k":"`+tc.key+`"}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.key, err)
		}
		if rep.status != tc.status || string(rep.body) != tc.body {
			t.Fatalf("%s: %d %.100s, want %d %.100s", tc.key, rep.status, rep.body, tc.status, tc.body)
		}
		if err := checkEnqueueReply(rep); err != nil {
			t.Fatalf("%s: %v", tc.key, err)
		}
	}
	// net/http's own 400 for a malformed request has no length and closes.
	rep, err := c.send(ctx, []byte("bad\x01key"), []byte(`{}`))
	if err != nil || rep.status != 400 || !strings.HasPrefix(string(rep.body), "400 Bad Request") {
		t.Fatalf("malformed request: %d %q %v", rep.status, rep.body, err)
	}
	if err := checkEnqueueReply(rep); err == nil {
		t.Fatal("a text/plain 400 passed the check")
	}
	if rep, err := c.send(ctx, []byte("plain"), []byte(`{"k":"plain"}`)); err != nil || rep.status != 200 {
		t.Fatalf("after the 400: %d %v", rep.status, err)
	}
}

// TestCheckEnqueueReply: a reply passes only as the job its Location names
// (201/200, JSON) or as a problem.
func TestCheckEnqueueReply(t *testing.T) {
	t.Parallel()
	job := `{"job":{"id":"5","kind":"k"},"existing":false}`
	for _, tc := range []struct {
		name string
		rep  benchReply
		ok   bool
	}{
		{"created", benchReply{201, []byte("application/json"), []byte("/v1/jobs/5"), []byte(job)}, true},
		{"another job", benchReply{201, []byte("application/json"), []byte("/v1/jobs/6"), []byte(job)}, false},
		{"no location", benchReply{201, []byte("application/json"), nil, []byte(job)}, false},
		{"not json", benchReply{201, []byte("text/plain"), []byte("/v1/jobs/5"), []byte(job)}, false},
		{"truncated", benchReply{201, []byte("application/json"), []byte("/v1/jobs/5"), []byte(job[:20])}, false},
		{"problem", benchReply{429, []byte("application/problem+json"), nil, []byte(`{"status":429}`)}, true},
		{"plain error", benchReply{400, []byte("text/plain; charset=utf-8"), nil, []byte("400 Bad Request")}, false},
	} {
		if err := checkEnqueueReply(tc.rep); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestBenchHTTPClients: both load generators run against the in-process
// server, every reply checked.
func TestBenchHTTPClients(t *testing.T) {
	t.Parallel()
	for _, client := range []string{"raw", "std"} {
		out, errs, code := run(t, "bench-http", "--client", client, "--requests", "30", "--concurrency", "3", "--keys", "4")
		if code != 0 || !strings.Contains(out, "client="+client) || !strings.Contains(out, "statuses map[201:30]") ||
			!strings.Contains(out, "statuses map[200:26 201:4]") {
			t.Fatalf("%s: %d %q %q", client, code, out, errs)
		}
	}
}
