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

// TestPublishNilPayloadIsNull: a nil payload is the JSON null, as the Go
// API's Publish takes it (the OpenAPI document's payload is required and
// any JSON, null included): the client sends "payload": null, the server
// publishes the event, and the event reads back with the payload null —
// over HTTP and through the Go API alike. A repeat with the same key is
// the same event.
func TestPublishNilPayloadIsNull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAPI(t, nil)
	rep, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Key: "k", Type: "x"})
	if err != nil || rep.Existing {
		t.Fatalf("Publish with a nil payload: %+v %v; want a new event with the payload null", rep, err)
	}
	events, _, err := e.admin.Events(ctx, "orders", "", nil, 0, "")
	if err != nil || len(events) != 1 || events[0].ID != rep.EventID || string(events[0].Payload) != "null" {
		t.Fatalf("events after a nil payload: %+v %v; want event %s with payload null", events, err, rep.EventID)
	}
	again, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Key: "k", Type: "x", Payload: json.RawMessage("null")})
	if err != nil || !again.Existing || again.EventID != rep.EventID {
		t.Fatalf("repeat with payload null: %+v %v; want the existing event %s", again, err, rep.EventID)
	}
}
