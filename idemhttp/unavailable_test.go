package idemhttp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
)

// TestPostgresUnreachableIs503: with the database gone, writes and reads
// answer 503 with Retry-After (a storage failure), never 500, and the Go
// library's error is ErrUnavailable.
func TestPostgresUnreachableIs503(t *testing.T) {
	t.Parallel()
	e, proxy := setupBehindProxy(t)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k"}) // the key is verified and cached
	proxy.Down()

	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"kind":"k"}`},
		{"GET", "/v1/jobs/" + id, ""},
		{"GET", "/v1/jobs?queue=default", ""},
		{"POST", "/v1/claim", `{"queues":["default"],"worker_id":"w"}`},
	} {
		r := e.req(c.method, c.path, e.keyA, bodyOrNil(c.body))
		expect(t, r, 503, "/problems/service-unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: 503 without Retry-After", c.method, c.path)
		}
	}
	_, err := e.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k"})
	if !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("library enqueue with the database gone: %v, want ErrUnavailable", err)
	}
}
