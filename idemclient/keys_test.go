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

// TestQuotedKeyIsKeptAsIs: a key that starts with a double quote (such as
// a JSON-encoded id, `"order-1"`) is that key, not the server's unquoted
// structured-field reading of the header (order-1): the job carries it,
// its record is found by it, and the key order-1 is another. So is a key
// with spaces around it, which a bare header value loses.
func TestQuotedKeyIsKeptAsIs(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	for _, key := range []string{`"order-1"`, `""`, `"half`, `"a\"b"`, " padded ", "  "} {
		a, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "ping", IdempotencyKey: key})
		if err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		if a.Job.IdempotencyKey != key {
			t.Fatalf("key %q: the job's key is %q", key, a.Job.IdempotencyKey)
		}
		if rec, err := e.admin.GetRecord(ctx, key); err != nil || rec.JobID != a.Job.ID {
			t.Fatalf("key %s: record %+v, %v", key, rec, err)
		}
	}
	b, err := e.admin.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "ping", IdempotencyKey: "order-1"})
	if err != nil || b.Existing {
		t.Fatalf("the key order-1 answered %+v, %v: it is not the key \"order-1\"", b, err)
	}
}
