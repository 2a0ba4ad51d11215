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

// A target pushes the jobs of a delivered queue to a URL as signed
// webhooks (docs/webhooks.md); the receiver's answer is the job's result.
func ExampleClient_TargetPut() {
	ctx := context.Background()
	st, closeStore := exampleStore(ctx)
	defer closeStore()

	secret, _ := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if webhook.Verify([]webhook.Secret{secret}, r.Header, body, time.Now(), 0) != nil {
			w.WriteHeader(http.StatusUnauthorized) // not signed by us
			return
		}
		var push struct {
			Kind string          `json:"kind"`
			Args json.RawMessage `json:"args"`
		}
		_ = json.Unmarshal(body, &push)
		fmt.Fprintf(w, `{"received":%q,"webhook_id":%q}`, push.Kind, r.Header.Get("webhook-id"))
	}))
	defer receiver.Close()

	client, _ := idem.NewClient(st, &idem.Config{
		Queues: map[string]idem.QueueConfig{"hooks": {MaxWorkers: 50, Deliver: true}},
	})
	created, err := client.TargetPut(ctx, &idem.Target{
		Name: "orders", Queue: "hooks", URL: receiver.URL,
		Secrets: []webhook.Secret{secret}, Timeout: 10 * time.Second,
	})
	fmt.Println("created:", created, err)
	_ = client.Start(ctx)
	defer client.Stop(ctx)

	res, _ := client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "order.shipped", Args: json.RawMessage(`{"order":42}`),
		Opts: &idem.EnqueueOpts{Queue: "hooks", IdempotencyKey: "order-42:shipped"}})
	job := exampleJobWait(ctx, client, res.Job.ID)
	fmt.Println(job.State, string(job.Result))
	// Output:
	// created: true <nil>
	// completed {"received":"order.shipped","webhook_id":"order-42:shipped"}
}
