package idemclient_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

// TestReplayEventsNilSelectsEveryEvent: ReplayEvents with a nil request
// replays every event of the topic, as the TypeScript and PHP clients'
// default (an empty selection) does. It sent the JSON body null, which the
// server refuses (400: a body must be an object).
func TestReplayEventsNilSelectsEveryEvent(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	if _, _, err := e.admin.PutSubscription(ctx, "orders", "billing", &idemclient.SubscriptionPut{URL: "http://127.0.0.1:9/b"}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"order.paid", "order.shipped"} {
		if _, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Type: typ, Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := e.admin.ReplayEvents(ctx, "orders", nil)
	if err != nil || rep.Events != 2 || rep.Deliveries != 2 {
		t.Fatalf("replay with a nil request: %+v %v, want the 2 events replayed", rep, err)
	}
}
