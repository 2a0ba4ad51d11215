package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/webhook"
)

// Publish appends an event to a topic and delivers it to every matching
// subscription as a signed webhook (Standard Webhooks), with the retries,
// dead-letter queue and replay of any job. A repeated event key publishes
// nothing twice.
func ExampleClient_Publish() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()

	secret, _ := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	received := make(chan idem.EventEnvelope, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if webhook.Verify([]webhook.Secret{secret}, r.Header, body, time.Now(), 0) != nil {
			w.WriteHeader(http.StatusUnauthorized) // not signed by us: retried, never accepted
			return
		}
		var delivery struct {
			Args idem.EventEnvelope `json:"args"`
		}
		_ = json.Unmarshal(body, &delivery)
		select {
		case received <- delivery.Args:
		default: // a redelivery: already seen
		}
	}))
	defer receiver.Close()

	client, _ := idem.NewClient(st, &idem.Config{
		Queues: map[string]idem.QueueConfig{idem.DefaultTopicQueue: {MaxWorkers: 1, Deliver: true}}})
	_, _ = client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: receiver.URL,
		Secrets: []webhook.Secret{secret}, EventTypes: []string{"order.paid"}})
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	ev := &idem.Event{Topic: "orders", Key: "order-17-paid", Type: "order.paid", PartitionKey: "order-17",
		Payload: json.RawMessage(`{"order":17,"cents":4200}`)}
	first, _ := client.Publish(ctx, ev)
	again, _ := client.Publish(ctx, ev)
	fmt.Println("deliveries:", first.Deliveries, "repeat is existing:", again.Existing)

	got := <-received
	fmt.Println(got.Topic, got.Type, got.PartitionKey, string(got.Payload))
	// Output:
	// deliveries: 1 repeat is existing: true
	// orders order.paid order-17 {"order":17,"cents":4200}
}
