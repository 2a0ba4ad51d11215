package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestPublishPayloadCheckedBeforeSending: an event payload the server's
// JSON rule refuses (here not JSON at all, which encoding/json cannot even
// send) is refused before sending as ErrInvalid naming payload, as
// Enqueue refuses its args.
func TestPublishPayloadCheckedBeforeSending(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	_, err := e.admin.Publish(context.Background(), "orders", &idemclient.PublishRequest{Type: "x", Payload: json.RawMessage(`{"a":`)})
	var ie *idem.InvalidError
	if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &ie) || ie.Field != "payload" {
		t.Fatalf("Publish with a payload that is not JSON: %v; want ErrInvalid naming payload", err)
	}
}
