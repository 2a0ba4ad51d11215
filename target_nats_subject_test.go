package idem_test

import (
	"errors"
	"testing"

	"github.com/idem-dev/idem"
)

// TestTargetNATSSubjectChecked: a nats:// target's subject is checked when
// the target is put. A subject JetStream cannot publish to (a wildcard
// token, an empty token, white space) was stored, and every delivery to it
// failed and retried until its job was dead.
func TestTargetNATSSubjectChecked(t *testing.T) {
	t.Parallel()
	b := setup(t, &idem.Config{Queues: queues(1)})
	ctx := t.Context()
	for _, url := range []string{
		"nats://127.0.0.1:4222/orders.*",
		"nats://127.0.0.1:4222/orders.>",
		"nats://127.0.0.1:4222/>",
		"nats://127.0.0.1:4222/orders..created",
		"nats://127.0.0.1:4222/.orders",
		"nats://127.0.0.1:4222/orders.",
		"nats://127.0.0.1:4222/orders%20created",
		"nats://127.0.0.1:4222/orders%09created",
		"nats://127.0.0.1:4222/orders%00created",
	} {
		_, err := b.client.TargetPut(ctx, &idem.Target{Name: "js", Queue: "hooks", URL: url})
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || inv.Field != "url" {
			t.Errorf("put of %s: %v, want invalid url", url, err)
		}
	}
	for _, url := range []string{"nats://127.0.0.1:4222/orders.created", "nats://127.0.0.1:4222/orders", "nats://127.0.0.1:4222/a-b_c.d*e"} {
		if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "js", Queue: "hooks", URL: url}); err != nil {
			t.Errorf("put of %s: %v", url, err)
		}
	}
}
