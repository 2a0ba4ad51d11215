package idem_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// BenchmarkTopicDelivery publishes b.N events to a topic with 1, 10 and 100
// subscriptions on one local receiver (SQLite) and reports events
// published/s and deliveries/s (publish to the last push acknowledged).
func BenchmarkTopicDelivery(b *testing.B) {
	for _, subs := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(subs)+"subs", func(b *testing.B) {
			ctx := context.Background()
			var got atomic.Int64
			want := int64(b.N * subs)
			done := make(chan struct{})
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if got.Add(1) == want {
					close(done)
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer rcv.Close()
			cfg := topicConfig()
			cfg.Queues = map[string]idem.QueueConfig{idem.DefaultTopicQueue: {MaxWorkers: 64, Deliver: true}}
			cfg.Delivery = &idem.DeliveryConfig{}
			cfg.Logger = quietLogger()
			cfg.DisableMaintenance = true
			client, err := idem.NewClient(testStore(b), cfg)
			if err != nil {
				b.Fatal(err)
			}
			for i := range subs {
				if _, err := client.SubscriptionPut(ctx, &idem.Subscription{Topic: "bench", Name: "s" + strconv.Itoa(i),
					URL: rcv.URL + "/" + strconv.Itoa(i)}); err != nil {
					b.Fatal(err)
				}
			}
			if err := client.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer func() {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_ = client.Stop(sctx)
			}()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if _, err := client.Publish(ctx, &idem.Event{Topic: "bench", Type: "t",
					PartitionKey: "e" + strconv.Itoa(i%50), Payload: json.RawMessage(`{"n":1}`)}); err != nil {
					b.Fatal(err)
				}
			}
			published := time.Since(start)
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Fatalf("%d of %d deliveries", got.Load(), want)
			}
			total := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/published.Seconds(), "events/s")
			b.ReportMetric(float64(want)/total.Seconds(), "deliveries/s")
		})
	}
}
