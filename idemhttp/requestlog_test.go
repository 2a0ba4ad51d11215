package idemhttp_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/idemhttp"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAccessLog: at info every API request logs one line with its id and
// status; above info none does, and the id is still answered.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
			e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{Logger: logger}})
			r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k"}, "X-Request-Id", "req-created")
			expect(t, r, 201, "")
			r2 := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": ""})
			expect(t, r2, 400, "/problems/invalid-request")
			id := r2.header.Get("X-Request-Id")
			if r.header.Get("X-Request-Id") != "req-created" || len(id) != 32 {
				t.Fatalf("request ids %q %q", r.header.Get("X-Request-Id"), id)
			}
			lines := strings.Count(logs.String(), "msg=\"http request\"")
			if level == slog.LevelWarn {
				if lines != 0 {
					t.Fatalf("access log above info:\n%s", logs.String())
				}
				return
			}
			if lines != 2 || !strings.Contains(logs.String(), "request_id=req-created method=POST path=/v1/jobs status=201") ||
				!strings.Contains(logs.String(), "request_id="+id+" method=POST path=/v1/jobs status=400") {
				t.Fatalf("access log:\n%s", logs.String())
			}
		})
	}
}

// TestRequestMetrics: each route's requests are counted by status and
// timed, across many requests and statuses.
func TestRequestMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for i := range 5 {
		expect(t, e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "args": map[string]int{"i": i}}), 201, "")
	}
	for _, status := range []int{201, 200, 200} {
		expect(t, e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k"}, "Idempotency-Key", "same"), status, "")
	}
	expect(t, e.req("POST", "/v1/jobs", "", map[string]any{"kind": "k"}), 401, "/problems/unauthorized")
	expect(t, e.req("POST", "/v1/jobs", "", map[string]any{"kind": "k"}), 401, "/problems/unauthorized")
	r := e.req("GET", "/metrics", "", nil)
	expect(t, r, 200, "")
	for _, want := range []string{
		`idem_http_requests_total{code="201",route="POST /v1/jobs"} 6`,
		`idem_http_requests_total{code="200",route="POST /v1/jobs"} 2`,
		`idem_http_requests_total{code="401",route="POST /v1/jobs"} 2`,
		`idem_http_request_duration_seconds_count{route="POST /v1/jobs"} 10`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("metrics without %s:\n%s", want, r.body)
		}
	}
	if strings.Contains(string(r.body), `route="GET /v1/jobs"`) {
		t.Fatal("a route without requests has series")
	}
}
