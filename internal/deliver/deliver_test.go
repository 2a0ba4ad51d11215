package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/webhook"
)

func TestPayload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    Delivery
		want string
	}{
		{"empty args are an object", Delivery{JobID: 1, Kind: "k", Attempt: 1},
			`{"job_id":1,"kind":"k","args":{},"attempt":1}`},
		{"every field", Delivery{JobID: 9, Kind: "order.paid", Args: json.RawMessage(`{"id":3}`), Attempt: 4,
			IdempotencyKey: "pay-3", PartitionKey: "cust-1"},
			`{"job_id":9,"kind":"order.paid","args":{"id":3},"attempt":4,"idempotency_key":"pay-3","partition_key":"cust-1"}`},
	} {
		got, err := tc.d.Payload()
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.name, got, err, tc.want)
		}
	}
	// Args that are not JSON cannot be sent.
	if _, err := (&Delivery{JobID: 1, Kind: "k", Args: json.RawMessage(`{`)}).Payload(); err == nil {
		t.Error("broken args encoded")
	}
}

func TestMessageIDLength(t *testing.T) {
	t.Parallel()
	k255 := strings.Repeat("k", 255)
	if got := (&Delivery{JobID: 3, IdempotencyKey: k255}).MessageID(); got != k255 {
		t.Errorf("a 255-byte key is not its own id: %q", got)
	}
	if got := (&Delivery{JobID: 3, IdempotencyKey: k255 + "k"}).MessageID(); got != "job_3" {
		t.Errorf("a 256-byte key is an id: %q", got)
	}
}

func TestClassString(t *testing.T) {
	t.Parallel()
	for c, want := range map[Class]string{Completed: "completed", Retry: "retry", Dead: "dead", 0: "Class(0)", 7: "Class(7)"} {
		if c.String() != want {
			t.Errorf("Class %d: %q, want %q", int(c), c.String(), want)
		}
	}
}

func TestNewWebhookChecks(t *testing.T) {
	t.Parallel()
	sender, err := webhook.NewSender(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Close)
	for name, tc := range map[string]struct {
		s   *webhook.Sender
		cfg *WebhookConfig
	}{
		"no sender": {nil, &WebhookConfig{URL: "http://127.0.0.1:9"}},
		"no config": {sender, nil},
		"no url":    {sender, &WebhookConfig{}},
	} {
		if _, err := NewWebhook(tc.s, tc.cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWebhookUnsignedAndFailures(t *testing.T) {
	t.Parallel()
	sender, err := webhook.NewSender(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Close)
	d := &Delivery{JobID: 5, Kind: "k", Attempt: 1}

	t.Run("without secrets nothing is signed", func(t *testing.T) {
		t.Parallel()
		var sig, jobID string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sig, jobID = r.Header.Get(webhook.HeaderSignature), r.Header.Get("Idem-Job-Id")
		}))
		t.Cleanup(srv.Close)
		target, err := NewWebhook(sender, &WebhookConfig{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		if out := target.Deliver(context.Background(), d); out.Class != Completed || out.Err != nil {
			t.Fatalf("outcome %+v", out)
		}
		if sig != "" || jobID != "5" {
			t.Errorf("signature %q job id %q, want none and 5", sig, jobID)
		}
	})
	t.Run("a refused connection is retried", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		target, err := NewWebhook(sender, &WebhookConfig{URL: "http://" + addr})
		if err != nil {
			t.Fatal(err)
		}
		out := target.Deliver(context.Background(), d)
		if out.Class != Retry || out.Status != 0 || out.Err == nil {
			t.Fatalf("outcome %+v", out)
		}
	})
	t.Run("a target's own timeout bounds the push", func(t *testing.T) {
		t.Parallel()
		stop := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select { // hold the push until the client gives up
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		t.Cleanup(func() { close(stop); srv.Close() })
		target, err := NewWebhook(sender, &WebhookConfig{URL: srv.URL, Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		out := target.Deliver(context.Background(), d)
		if out.Class != Retry || out.Err == nil {
			t.Fatalf("outcome %+v", out)
		}
	})
	t.Run("an invalid url is dead", func(t *testing.T) {
		t.Parallel()
		target, err := NewWebhook(sender, &WebhookConfig{URL: "ftp://127.0.0.1/x"})
		if err != nil {
			t.Fatal(err)
		}
		out := target.Deliver(context.Background(), d)
		if out.Class != Dead || !errors.Is(out.Err, webhook.ErrInvalidURL) {
			t.Fatalf("outcome %+v", out)
		}
	})
}
