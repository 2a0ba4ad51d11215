package idem_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
)

// TestPublishKeyReused (both stores): a repeat of an event key with the
// same event (payload in another key order and spacing, absent metadata
// and {} alike) is the existing event; with a different payload, type,
// partition key or metadata it is refused with ErrKeyReused, as a job key
// reused with other arguments is, and creates no delivery.
func TestPublishKeyReused(t *testing.T) {
	t.Parallel()
	bothStores(t, func() *idem.Config { return &idem.Config{Logger: quietLogger(), DisableMaintenance: true} },
		func(t *testing.T, c *idem.Client) {
			ctx := t.Context()
			if _, err := c.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:9/hook"}); err != nil {
				t.Fatal(err)
			}
			first, err := c.Publish(ctx, &idem.Event{Topic: "orders", Key: "o1-paid", Type: "paid", PartitionKey: "o1",
				Payload: json.RawMessage(`{"amount":5,"currency":"EUR"}`)})
			if err != nil || first.Existing {
				t.Fatalf("publish: %+v %v", first, err)
			}
			same, err := c.Publish(ctx, &idem.Event{Topic: "orders", Key: "o1-paid", Type: "paid", PartitionKey: "o1",
				Payload: json.RawMessage(`{ "currency": "EUR", "amount": 5 }`), Metadata: json.RawMessage(`{}`)})
			if err != nil || !same.Existing || same.Event.ID != first.Event.ID {
				t.Fatalf("repeat of the same event: %+v %v, want the existing event %d", same, err, first.Event.ID)
			}
			for name, ev := range map[string]*idem.Event{
				"payload":       {Payload: json.RawMessage(`{"amount":6,"currency":"EUR"}`), Type: "paid", PartitionKey: "o1"},
				"type":          {Payload: json.RawMessage(`{"amount":5,"currency":"EUR"}`), Type: "refunded", PartitionKey: "o1"},
				"partition_key": {Payload: json.RawMessage(`{"amount":5,"currency":"EUR"}`), Type: "paid", PartitionKey: "o2"},
				"metadata": {Payload: json.RawMessage(`{"amount":5,"currency":"EUR"}`), Type: "paid", PartitionKey: "o1",
					Metadata: json.RawMessage(`{"region":"eu"}`)},
			} {
				ev.Topic, ev.Key = "orders", "o1-paid"
				res, err := c.Publish(ctx, ev)
				if !errors.Is(err, idem.ErrKeyReused) {
					t.Fatalf("repeat with another %s: %+v %v, want ErrKeyReused", name, res, err)
				}
			}
			if jobs, _, err := c.JobList(ctx, &idem.JobListParams{Limit: 10}); err != nil || len(jobs) != 1 {
				t.Fatalf("%d delivery jobs (%v), want 1", len(jobs), err)
			}
		})
}
