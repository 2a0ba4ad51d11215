package deliver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ Target = (*Webhook)(nil)

func TestDeliveryMessageID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tenant, key, want string
	}{
		{"", "order-42:shipped", "order-42:shipped"},
		{"default", "order-42:shipped", "order-42:shipped"},
		{"", "", "job_7"},
		{"", "has space", "job_7"},
		{"", "line\nbreak", "job_7"},
		{"", "é", "job_7"},
		// Other tenants: "<tenant> <key>", so the same key of two tenants
		// (or a tenant and a key holding '/') are two messages.
		{"acme", "order-1", "acme order-1"},
		{"acme/x", "order-1", "acme/x order-1"},
		{"acme", "x/order-1", "acme x/order-1"},
		{"acme", "", "job_7"},
		{"acme", "has space", "job_7"},
	}
	for _, tt := range tests {
		d := &Delivery{JobID: 7, IdempotencyKey: tt.key, Tenant: tt.tenant}
		if got := d.MessageID(); got != tt.want {
			t.Errorf("MessageID(%q, %q) = %q, want %q", tt.tenant, tt.key, got, tt.want)
		}
	}
}

func TestWebhookTarget(t *testing.T) {
	t.Parallel()
	sec, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	sender, err := webhook.NewSender(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Close)
	d := &Delivery{JobID: 42, Kind: "order.shipped", Args: json.RawMessage(`{"order":42}`), Attempt: 2,
		IdempotencyKey: "order-42", PartitionKey: "customer-9"}

	t.Run("signed payload completes with the receiver's body", func(t *testing.T) {
		t.Parallel()
		var got Payload
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := webhook.Verify([]webhook.Secret{sec}, r.Header, body, time.Now(), 0); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			if r.Header.Get(webhook.HeaderID) != "order-42" || r.Header.Get("Idem-Attempt") != "2" {
				http.Error(w, "headers", http.StatusBadRequest)
				return
			}
			if err := json.Unmarshal(body, &got); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = io.WriteString(w, `{"shipped":true}`)
		}))
		t.Cleanup(srv.Close)
		target, err := NewWebhook(sender, &WebhookConfig{URL: srv.URL, Secrets: []webhook.Secret{sec}})
		if err != nil {
			t.Fatal(err)
		}
		out := target.Deliver(t.Context(), d)
		if out.Class != Completed || string(out.Result) != `{"shipped":true}` || out.Status != 200 {
			t.Fatalf("outcome %v %d %q %v", out.Class, out.Status, out.Result, out.Err)
		}
		want := Payload{JobID: 42, Kind: "order.shipped", Args: json.RawMessage(`{"order":42}`), Attempt: 2, IdempotencyKey: "order-42", PartitionKey: "customer-9"}
		if got.JobID != want.JobID || got.Kind != want.Kind || string(got.Args) != string(want.Args) ||
			got.Attempt != want.Attempt || got.IdempotencyKey != want.IdempotencyKey || got.PartitionKey != want.PartitionKey {
			t.Fatalf("payload %+v, want %+v", got, want)
		}
	})
	t.Run("classes map through", func(t *testing.T) {
		t.Parallel()
		for status, want := range map[int]Class{503: Retry, 429: Retry, 410: Dead, 204: Completed} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(status)
			}))
			target, err := NewWebhook(sender, &WebhookConfig{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			out := target.Deliver(t.Context(), d)
			srv.Close()
			if out.Class != want || out.Status != status || out.RetryAfter != 3*time.Second {
				t.Fatalf("status %d: %v %v %v", status, out.Class, out.RetryAfter, out.Err)
			}
		}
	})
}
