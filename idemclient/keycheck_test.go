package idemclient_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestHeaderKeyRefusedBeforeSending: a key that travels as the
// Idempotency-Key header (Enqueue's, BatchCreate's) outside printable
// ASCII (0x20–0x7E) is refused before anything is sent, with ErrInvalid
// naming idempotency_key or key, as the other clients refuse it
// (docs/clients.md, "Keys"). A control character made net/http refuse the
// request, which the client took for a network error: it tried five
// times, backing off, and returned that transport error; a byte above
// 0x7E was sent, and refused by the server.
func TestHeaderKeyRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	var sent atomic.Int32
	e := newAPI(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				sent.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	ctx := context.Background()
	for _, key := range []string{"a\r\nb", "a\nX-Evil: 1", "nul\x00", "del\x7f", "é", "tab\t"} {
		_, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", IdempotencyKey: key})
		var inv *idem.InvalidError
		if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &inv) || inv.Field != "idempotency_key" {
			t.Errorf("Enqueue with key %q: %v, want ErrInvalid naming idempotency_key", key, err)
		}
		_, err = e.admin.BatchCreate(ctx, key, nil, []*idemclient.EnqueueRequest{{Kind: "k"}})
		if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &inv) || inv.Field != "key" {
			t.Errorf("BatchCreate with key %q: %v, want ErrInvalid naming key", key, err)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d requests with refused keys were sent", n)
	}
	// Printable keys, the space and the quote included, are sent.
	for _, key := range []string{"a b", `"q"`, "~!"} {
		if _, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", IdempotencyKey: key}); err != nil {
			t.Errorf("Enqueue with key %q: %v", key, err)
		}
	}
}
