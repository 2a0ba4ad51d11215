package deliver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idem-dev/idem/webhook"
)

// Webhook delivers by pushing the payload to a URL with a Standard Webhooks
// signature.
type Webhook struct {
	sender  *webhook.Sender
	url     string
	signer  *webhook.Signer
	timeout time.Duration
}

// WebhookConfig configures one webhook target.
type WebhookConfig struct {
	// URL receives the POST. Required.
	URL string
	// Secrets sign each push, the first listed first; several while one is
	// rotated. None: unsigned.
	Secrets []webhook.Secret
	// Timeout bounds one push to this target; 0 uses the sender's.
	Timeout time.Duration
}

// NewWebhook returns a target pushing through sender (shared by all webhook
// targets, so its per-target caps apply across them).
func NewWebhook(sender *webhook.Sender, cfg *WebhookConfig) (*Webhook, error) {
	if sender == nil || cfg == nil || cfg.URL == "" {
		return nil, errors.New("deliver: webhook needs a sender and a URL")
	}
	w := &Webhook{sender: sender, url: cfg.URL, timeout: cfg.Timeout}
	if len(cfg.Secrets) > 0 {
		signer, err := webhook.NewSigner(cfg.Secrets...)
		if err != nil {
			return nil, err
		}
		w.signer = signer
	}
	return w, nil
}

// Deliver pushes d once.
func (w *Webhook) Deliver(ctx context.Context, d *Delivery) Outcome {
	body, err := d.Payload()
	if err != nil {
		return Outcome{Class: Dead, Err: err}
	}
	h := http.Header{}
	h.Set("Idem-Job-Id", strconv.FormatInt(d.JobID, 10))
	h.Set("Idem-Attempt", strconv.Itoa(d.Attempt))
	out := w.sender.Send(ctx, &webhook.Request{
		URL: w.url, ID: d.MessageID(), Body: body, Signer: w.signer, Header: h, Timeout: w.timeout,
	})
	return Outcome{
		Class: fromWebhookClass(out.Class), Result: out.Body, Truncated: out.Truncated,
		RetryAfter: out.RetryAfter, Latency: out.Latency, Status: out.Status, Err: out.Err,
	}
}

// fromWebhookClass maps the sender's classes onto the seam's.
func fromWebhookClass(c webhook.Class) Class {
	switch c {
	case webhook.ClassCompleted:
		return Completed
	case webhook.ClassDead:
		return Dead
	default:
		return Retry
	}
}
