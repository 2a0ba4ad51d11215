package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestLeaseCompleteResultRule: LeaseComplete refuses before sending, with
// an error naming result that is errors.Is ErrInvalid, every result the
// server refuses (the rule of idem.ValidateJSON: a number beyond the
// double range, nesting over MaxJSONDepth, over MaxArgsBytes, a repeated
// member name); it checked nothing and sent them. A valid result, null
// and none are sent.
func TestLeaseCompleteResultRule(t *testing.T) {
	t.Parallel()
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"key":"k","acquired":false,"cached":false}`))
	}))
	t.Cleanup(srv.Close)
	c, err := idemclient.New(srv.URL, &idemclient.Config{APIKey: "k", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deep := strings.Repeat("[", idem.MaxJSONDepth+1) + strings.Repeat("]", idem.MaxJSONDepth+1)
	big := `"` + strings.Repeat("x", idem.MaxArgsBytes) + `"`
	for name, res := range map[string]string{"1e400": `1e400`, "too deep": deep, "too big": big,
		"duplicate names": `{"a":1,"a":2}`, "not JSON": `{`} {
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
