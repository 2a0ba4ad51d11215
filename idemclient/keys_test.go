package idemclient_test

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

func TestNewKey(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 200 {
		k := idemclient.NewKey()
		if b, err := hex.DecodeString(k); err != nil || len(b) != 16 {
			t.Fatalf("key %q is not 128 bits of hex", k)
		}
		if seen[k] {
			t.Fatalf("key %q repeated", k)
		}
		seen[k] = true
	}
}

// TestEnqueueWithoutKeyIsNewEachCall: without an IdempotencyKey each call
// is its own job (the generated key only protects that call's retries);
// with one, the calls are one job.
func TestEnqueueWithoutKeyIsNewEachCall(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	req := &idemclient.EnqueueRequest{Kind: "ping", Args: []byte(`{"n":1}`)}
	a, err := e.admin.Enqueue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.admin.Enqueue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Job.ID == b.Job.ID || a.Existing || b.Existing || a.Job.IdempotencyKey == b.Job.IdempotencyKey {
		t.Fatalf("two calls without a key: %+v / %+v", a.Job, b.Job)
	}
	if req.IdempotencyKey != "" {
		t.Fatalf("Enqueue changed the caller's request: key %q", req.IdempotencyKey)
	}
}
