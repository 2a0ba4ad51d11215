package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestEnqueueBatchBadItemFailsOnlyItself: an item whose args or metadata
// Enqueue refuses before sending (not JSON, or refused by the server's
// JSON rule) fails only itself in EnqueueBatch, with the 400 problem
// naming its field (errors.Is ErrInvalid), and the other items are
// enqueued, each result in its item's place. An item that was not JSON
// failed the whole batch with an encoding error, and nothing was sent.
func TestEnqueueBatchBadItemFailsOnlyItself(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	for name, c := range map[string]struct {
		bad   *idemclient.EnqueueRequest
		field string
	}{
		"args not JSON":     {&idemclient.EnqueueRequest{Kind: "k", Queue: "bi", Args: json.RawMessage(`{bad`)}, "args"},
		"metadata not JSON": {&idemclient.EnqueueRequest{Kind: "k", Queue: "bi", Metadata: json.RawMessage(`{"a":`)}, "metadata"},
		"duplicate names":   {&idemclient.EnqueueRequest{Kind: "k", Queue: "bi", Args: json.RawMessage(`{"a":1,"a":2}`)}, "args"},
		"number too big":    {&idemclient.EnqueueRequest{Kind: "k", Queue: "bi", Args: json.RawMessage(`{"n":1e400}`)}, "args"},
	} {
		res, err := e.admin.EnqueueBatch(ctx, []*idemclient.EnqueueRequest{
			{Kind: "k", Queue: "bi", Args: json.RawMessage(`{"n":1}`)}, c.bad, {Kind: "k", Queue: "bi", Args: json.RawMessage(`{"n":2}`)}})
		if err != nil {
			t.Fatalf("%s: the batch failed as a whole: %v", name, err)
		}
		if len(res) != 3 {
			t.Fatalf("%s: %d results, want 3", name, len(res))
		}
		for i, n := range map[int]float64{0: 1, 2: 2} {
			var args struct{ N float64 }
			if res[i].Job == nil || res[i].Error != nil || json.Unmarshal(res[i].Job.Args, &args) != nil || args.N != n {
				t.Fatalf("%s: item %d: %+v, want its job (n %v)", name, i, res[i], n)
			}
		}
		if p := res[1].Error; res[1].Job != nil || p == nil || !errors.Is(p, idem.ErrInvalid) || p.Errors[c.field] == "" {
			t.Fatalf("%s: the bad item: %+v, want a 400 problem naming %s", name, res[1], c.field)
		}
	}
	// Every item refused: nothing to send, each result its refusal.
	res, err := e.admin.EnqueueBatch(ctx, []*idemclient.EnqueueRequest{{Kind: "k", Args: json.RawMessage(`[`)}})
	if err != nil || len(res) != 1 || res[0].Error == nil || res[0].Error.Errors["args"] == "" {
		t.Fatalf("a batch of one refused item: %+v, %v", res, err)
	}
}
