package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestEventRetentionDefaultIsSeed003: with no retention settings, a started
// client's retention keeps the event log for seed 003's replay look-back of
// 90 days: an event 91 days old is deleted while one 89 days old stays and
// is replayed.
func TestEventRetentionDefaultIsSeed003(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2025, 8, 14, 12, 0, 0, 0, time.UTC)
	clk := &fakeClock{now: t0}
	b := setup(t, &idem.Config{Now: clk.Now, MaintenanceInterval: 10 * time.Millisecond})
	sub := newSubscriber(t)
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "geofence-events", Name: "signalr", URL: sub.srv.URL}); err != nil {
		t.Fatal(err)
	}
	publish := func(key string) {
		t.Helper()
		if _, err := b.client.Publish(ctx, &idem.Event{Topic: "geofence-events", Key: key, Type: "enter",
			PartitionKey: "vehicle-123", Payload: json.RawMessage(`{"geofence":"fence-A"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	publish("evt-old")
	clk.Add(2 * 24 * time.Hour)
	publish("evt-kept")
	clk.Add(89 * 24 * time.Hour) // evt-old is 91 days old, evt-kept 89
	b.start(t)

	filter := &idem.EventFilter{Topic: "geofence-events", PartitionKey: "vehicle-123"}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		list, err := b.client.EventList(ctx, filter, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, len(list))
		for i, e := range list {
			keys[i] = e.Key
		}
		if len(keys) == 1 && keys[0] == "evt-kept" {
			break
		}
		if len(keys) == 0 {
			t.Fatal("retention deleted the 89-day-old event")
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("event log holds %v, want only evt-kept (89 days old)", keys)
		}
	}
	res, err := b.client.EventReplay(ctx, filter, "signalr")
	if err != nil || res.Events != 1 {
		t.Fatalf("replay of the 89-day-old event: %+v (%v), want 1 event", res, err)
	}
}
