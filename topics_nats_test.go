package idem_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem"
)

// natsStream connects to the real NATS server and creates this test's own
// stream, deleted when the test ends; it fails under IDEM_REQUIRE_NATS=1
// when there is no server and skips loudly otherwise.
func natsStream(t *testing.T) (server string, js jetstream.JetStream, stream jetstream.Stream, subject string) {
	t.Helper()
	server = os.Getenv("IDEM_NATS_URL")
	if server == "" {
		server = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(server, nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		if os.Getenv("IDEM_REQUIRE_NATS") == "1" {
			t.Fatalf("NATS at %s is required (IDEM_REQUIRE_NATS=1): %v", server, err)
		}
		t.Skipf("*** SKIP: NATS at %s not answering (%v); IDEM_REQUIRE_NATS=1 makes this a failure ***", server, err)
	}
	t.Cleanup(nc.Close)
	if js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name, subject := "IDEM_TOPIC_"+hex.EncodeToString(b), "idem.topic."+hex.EncodeToString(b)
	stream, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{subject},
		Storage: jetstream.MemoryStorage, Duplicates: time.Hour})
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
	return server, js, stream, subject
}

// TestTopicNATSSubscription: a subscription whose target is a JetStream
// subject (nats://host:port/subject) gets every event once, with
// Nats-Msg-Id = the delivery's key, in order per entity; the attempt log
// names it.
func TestTopicNATSSubscription(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server, _, stream, subject := natsStream(t)
	b := setup(t, topicConfig())
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "stream", URL: server + "/" + subject}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	const n = 6
	for i := 1; i <= n; i++ {
		if _, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: fmt.Sprintf("k%d", i), PartitionKey: "o1",
			Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var got []idem.EventEnvelope
	for len(got) < n {
		msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		var p struct{ Args idem.EventEnvelope }
		if err := json.Unmarshal(msg.Data(), &p); err != nil {
			t.Fatal(err)
		}
		if want := "event-" + p.Args.EventID + "/stream"; msg.Headers().Get("Nats-Msg-Id") != want {
			t.Errorf("Nats-Msg-Id %q, want %q", msg.Headers().Get("Nats-Msg-Id"), want)
		}
		got = append(got, p.Args)
	}
	checkOrder(t, "nats", got)
	jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Limit: 10})
	if err != nil || len(jobs) != n {
		t.Fatalf("jobs %d %v", len(jobs), err)
	}
	row := waitState(t, b, jobs[0].ID, idem.StateCompleted)
	atts, err := b.client.JobAttempts(ctx, "", row.ID)
	if err != nil || len(atts) != 1 || atts[0].Target != "orders/stream" {
		t.Fatalf("attempts %+v %v", atts, err)
	}
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs != n {
		t.Fatalf("stream holds %v messages (%v), want %d", info.State.Msgs, err, n)
	}
}

// TestNATSTargetAfterClosedConnection: when the connection to the NATS
// server is closed (nats.go closes it for good after its reconnect attempts
// run out during an outage), the next delivery connects again instead of
// failing on the closed connection until the job is dead.
func TestNATSTargetAfterClosedConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server, _, stream, subject := natsStream(t)
	cfg := topicConfig()
	cfg.MaxAttempts = 5 // fails fast: dead after 5 refused publishes
	b := setup(t, cfg)
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "stream", URL: server + "/" + subject}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	publish := func(key string) *idem.JobRow {
		t.Helper()
		if _, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: key, Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Limit: 1})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("jobs %v %v", jobs, err)
		}
		return jobs[0]
	}
	waitState(t, b, publish("before").ID, idem.StateCompleted)
	idem.CloseNATSConns(b.client)
	waitState(t, b, publish("after").ID, idem.StateCompleted)
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream holds %v messages (%v), want 2", info.State.Msgs, err)
	}
}

// TestNATSTargetTenantsShareKey: jobs of two tenants with the same
// idempotency key, delivered to one JetStream stream, are two messages: the
// default tenant's Nats-Msg-Id is the key, another tenant's "<tenant>
// <key>". With the key alone for both, JetStream's deduplication dropped
// the second tenant's message (its job completed {"duplicate":true}).
func TestNATSTargetTenantsShareKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server, _, stream, subject := natsStream(t)
	b := setup(t, deliveryConfig())
	tenants := []string{idem.DefaultTenant, "acme", "acme/eu"}
	for _, tenant := range tenants {
		if _, err := b.client.TargetPut(ctx, &idem.Target{Tenant: tenant, Name: "js", Queue: "hooks",
			URL: server + "/" + subject}); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t)
	want := map[string]bool{"order-1": true, "acme order-1": true, "acme/eu order-1": true}
	for _, tenant := range tenants {
		res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship", Args: json.RawMessage(`{}`),
			Opts: &idem.EnqueueOpts{Tenant: tenant, Queue: "hooks", IdempotencyKey: "order-1"}})
		if err != nil {
			t.Fatal(err)
		}
		row := waitState(t, b, res.Job.ID, idem.StateCompleted)
		var ack struct{ Duplicate bool }
		if err := json.Unmarshal(row.Result, &ack); err != nil || ack.Duplicate {
			t.Errorf("tenant %s: result %s: the stream took it for a duplicate", tenant, row.Result)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs != uint64(len(tenants)) {
		t.Fatalf("stream holds %v messages (%v), want %d", info.State.Msgs, err, len(tenants))
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range tenants {
		msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		id := msg.Headers().Get("Nats-Msg-Id")
		if !want[id] {
			t.Errorf("Nats-Msg-Id %q: not one of %v, or seen twice", id, want)
		}
		delete(want, id)
	}
}
