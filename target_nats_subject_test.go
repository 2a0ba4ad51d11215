package idem_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem"
)

// TestTargetNATSSubjectChecked: a nats:// target's subject is checked when
// the target is put. A subject JetStream cannot publish to (a wildcard
// token, an empty token, white space) was stored, and every delivery to it
// failed and retried until its job was dead; one NATS reserves for itself
// (starting with '$', such as its JetStream API) was published to.
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
		// A query or fragment is not part of the path: the subject
		// published to was "orders", not what the URL shows.
		"nats://127.0.0.1:4222/orders?created",
		"nats://127.0.0.1:4222/orders#created",
		"nats://127.0.0.1:4222/orders?",
		"nats://127.0.0.1:4222/orders#",
		// Subjects starting with '$' are NATS's own (its JetStream API,
		// key-value and object stores, system account):
		// $JS.API.STREAM.DELETE.X is a stream's deletion.
		"nats://127.0.0.1:4222/$JS.API.STREAM.DELETE.ORDERS",
		"nats://127.0.0.1:4222/$JS.ACK.orders",
		"nats://127.0.0.1:4222/$KV.config.key",
		"nats://127.0.0.1:4222/$O.files.x",
		"nats://127.0.0.1:4222/$SYS.REQ.SERVER.PING",
		"nats://127.0.0.1:4222/%24JS.API.INFO",
	} {
		_, err := b.client.TargetPut(ctx, &idem.Target{Name: "js", Queue: "hooks", URL: url})
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || inv.Field != "url" {
			t.Errorf("put of %s: %v, want invalid url", url, err)
		}
	}
	for _, url := range []string{"nats://127.0.0.1:4222/orders.created", "nats://127.0.0.1:4222/orders", "nats://127.0.0.1:4222/a-b_c.d*e",
		"nats://127.0.0.1:4222/orders%3Fcreated%23x", "nats://127.0.0.1:4222/orders.$v1"} {
		if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "js", Queue: "hooks", URL: url}); err != nil {
			t.Errorf("put of %s: %v", url, err)
		}
	}
}

// TestTargetNATSSubjectLength: a nats:// target's subject is at most 4,000
// bytes. A longer one (over the 4,096-byte control line a NATS server
// reads by default, with the publish's reply subject and sizes) was
// stored, and each delivery to it made the server close the connection
// ("maximum control line exceeded"): the deliveries of the other targets
// of that server sharing it failed too. A subject of 4,000 bytes is
// accepted and delivered.
func TestTargetNATSSubjectLength(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	server, js, _, _ := natsStream(t)
	b := setup(t, deliveryConfig())
	tag := make([]byte, 6)
	_, _ = rand.Read(tag)
	prefix := "idem.long." + hex.EncodeToString(tag) + "."
	longest := prefix + strings.Repeat("x", 4000-len(prefix))
	name := "IDEM_LONG_" + hex.EncodeToString(tag)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ">"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	for _, n := range []int{4001, 5000} {
		url := server + "/" + prefix + strings.Repeat("x", n-len(prefix))
		_, err := b.client.TargetPut(ctx, &idem.Target{Name: "js", Queue: "hooks", URL: url})
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || inv.Field != "url" {
			t.Errorf("put of a subject of %d bytes: %v, want invalid url", n, err)
		}
	}
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "js", Queue: "hooks", URL: server + "/" + longest}); err != nil {
		t.Fatalf("put of a subject of 4000 bytes: %v", err)
	}
	b.start(t)
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship", Args: json.RawMessage(`{}`),
		Opts: &idem.EnqueueOpts{Queue: "hooks", IdempotencyKey: "long-subject"}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, b, res.Job.ID, idem.StateCompleted)
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %v messages (%v), want 1", info.State.Msgs, err)
	}
}
