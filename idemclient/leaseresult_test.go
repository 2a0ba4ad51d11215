package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
)

// TestLeaseCompleteResultRule: LeaseComplete refuses before sending, with
// an error naming result that is errors.Is ErrInvalid, every result the
// server refuses (the rule of idem.ValidateJSON: a number beyond the
// double range, nesting over MaxJSONDepth, over MaxArgsBytes, a repeated
// member name); it checked nothing and sent them. A valid result, null
// and none are sent.
func TestLeaseCompleteResultRule(t *testing.T) {
	t.Parallel()
	c, sent := countingClient(t, `{"key":"k","acquired":false,"cached":false}`)
	ctx := context.Background()
	bad := refusedDocuments()
	bad["not JSON"] = `{`
	for name, res := range bad {
		_, err := c.LeaseComplete(ctx, "k", "tok", json.RawMessage(res), 0)
		var inv *idem.InvalidError
		if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &inv) || inv.Field != "result" {
			t.Errorf("%s: %v, want ErrInvalid naming result", name, err)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d refused results were sent", n)
	}
	for _, res := range []json.RawMessage{json.RawMessage(`{"ok":1}`), json.RawMessage(`null`), nil} {
		if _, err := c.LeaseComplete(ctx, "k", "tok", res, 0); err != nil {
			t.Errorf("result %s: %v", res, err)
		}
	}
	if n := sent.Load(); n != 3 {
		t.Fatalf("%d results sent, want 3", n)
	}
}
