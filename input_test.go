package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

// TestEnqueueRejectsBadInput: the Go library refuses what the stores
// cannot hold unchanged, with a typed error naming the field, and writes
// nothing.
func TestEnqueueRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	cases := []struct {
		name  string
		p     idem.EnqueueParams
		field string
	}{
		{"args invalid UTF-8", idem.EnqueueParams{Kind: "k", Args: json.RawMessage("{\"s\":\"\xff\"}")}, "args"},
		{"args lone surrogate", idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"s":"\ud800"}`)}, "args"},
		{"args duplicate keys", idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"a":1,"a":2}`)}, "args"},
		{"args number out of range", idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"n":1e400}`)}, "args"},
		{"args too deep", idem.EnqueueParams{Kind: "k", Args: json.RawMessage(deep(idem.MaxJSONDepth + 1))}, "args"},
		{"metadata invalid UTF-8", idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Metadata: json.RawMessage("{\"s\":\"\xc3\x28\"}")}}, "metadata"},
		{"priority above range", idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Priority: idem.MaxPriority + 1}}, "priority"},
		{"priority below range", idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Priority: idem.MinPriority - 1}}, "priority"},
		{"kind NUL", idem.EnqueueParams{Kind: "k\x00"}, "kind"},
	}
	for _, c := range cases {
		for _, withKey := range []bool{false, true} {
			p := c.p
			if withKey {
				o := idem.EnqueueOpts{}
				if p.Opts != nil {
					o = *p.Opts
				}
				o.IdempotencyKey = "key-" + c.field
				p.Opts = &o
			}
			_, err := b.client.EnqueueRaw(ctx, p)
			var inv *idemtype.InvalidError
			if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &inv) || inv.Field != c.field {
				t.Errorf("%s (key %v): err %v, want an InvalidError of %s", c.name, withKey, err, c.field)
			}
		}
	}
	rows, _, err := b.client.JobListAll(ctx, &idem.JobListParams{})
	if err != nil || len(rows) != 0 {
		t.Fatalf("bad input wrote %d jobs (%v)", len(rows), err)
	}
	if _, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Args: json.RawMessage(deep(idem.MaxJSONDepth)),
		Opts: &idem.EnqueueOpts{Priority: idem.MaxPriority}}); err != nil {
		t.Fatalf("the limits themselves are refused: %v", err)
	}
}

// TestJobListRejectsBadFilter: a filter no job can match is bad input.
func TestJobListRejectsBadFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, f := range []idem.JobFilter{{Queue: "q\x00"}, {Kind: "\xff"}, {PartitionKey: "a\tb"}, {IdempotencyKey: "\x00"}} {
		if _, _, err := b.client.JobList(context.Background(), &idem.JobListParams{Filter: f}); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("filter %+v: err %v, want ErrInvalid", f, err)
		}
	}
}

func deep(n int) string {
	out := make([]byte, 0, 2*n)
	for i := 0; i < n; i++ {
		out = append(out, '[')
	}
	for i := 0; i < n; i++ {
		out = append(out, ']')
	}
	return string(out)
}
