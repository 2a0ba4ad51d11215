package natstarget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/idem-dev/idem/internal/deliver"
)

// TestMain warns on stderr, visible without -v, when the NATS tests will
// skip, then checks for leaked goroutines.
func TestMain(m *testing.M) {
	if nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.NoReconnect()); err != nil {
		fmt.Fprintf(os.Stderr, "natstarget: NATS at %s not answering (%v): JetStream tests SKIP (FAIL under IDEM_REQUIRE_NATS=1)\n", natsURL(), err)
	} else {
		nc.Close()
	}
	goleak.VerifyTestMain(m)
}

var _ deliver.Target = (*Target)(nil)

// natsURL is the server the tests use: IDEM_NATS_URL, else the local one.
func natsURL() string {
	if u := os.Getenv("IDEM_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// bundle is one test's connection and its own stream.
type bundle struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	subject string
}

// setup connects to the real NATS server and creates a uniquely named stream,
// deleted when the test ends. Without a server it fails under
// IDEM_REQUIRE_NATS=1 and skips loudly otherwise.
func setup(t testing.TB) bundle {
	t.Helper()
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		if os.Getenv("IDEM_REQUIRE_NATS") == "1" {
			t.Fatalf("NATS at %s is required (IDEM_REQUIRE_NATS=1) but not answering: %v", natsURL(), err)
		}
		t.Skipf("SKIP: NATS at %s not answering (%v); set IDEM_REQUIRE_NATS=1 to make this a failure", natsURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "IDEM_TEST_" + hex.EncodeToString(suffix)
	subject := "idem.test." + hex.EncodeToString(suffix)
	stream, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage, Duplicates: time.Minute,
	})
	if err != nil {
		t.Fatalf("create stream %s (is JetStream enabled, -js?): %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return bundle{js: js, stream: stream, subject: subject}
}

func (b bundle) msgs(t *testing.T) uint64 {
	t.Helper()
	info, err := b.stream.Info(t.Context())
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

func TestTarget(t *testing.T) {
	t.Parallel()

	t.Run("publish ack completes and carries the payload and headers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		target, err := New(b.js, &Config{Subject: b.subject})
		if err != nil {
			t.Fatal(err)
		}
		d := &deliver.Delivery{JobID: 9, Kind: "geofence.enter", Args: json.RawMessage(`{"fence":3}`), Attempt: 1, IdempotencyKey: "evt-9", PartitionKey: "fence-3"}
		out := target.Deliver(t.Context(), d)
		if out.Class != deliver.Completed || out.Err != nil {
			t.Fatalf("outcome %v %v", out.Class, out.Err)
		}
		var ack Ack
		if err := json.Unmarshal(out.Result, &ack); err != nil || ack.Sequence != 1 || ack.Duplicate {
			t.Fatalf("ack %s: %v", out.Result, err)
		}
		msg, err := b.stream.GetMsg(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := d.Payload()
		if string(msg.Data) != string(want) || msg.Header.Get(jetstream.MsgIDHeader) != "evt-9" || msg.Header.Get("Idem-Partition-Key") != "fence-3" {
			t.Fatalf("stored %s with headers %v", msg.Data, msg.Header)
		}
	})
	t.Run("duplicate message ids are dropped by the broker", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		target, err := New(b.js, &Config{Subject: b.subject})
		if err != nil {
			t.Fatal(err)
		}
		first := &deliver.Delivery{JobID: 1, Kind: "k", IdempotencyKey: "evt-1", Attempt: 1}
		retry := &deliver.Delivery{JobID: 1, Kind: "k", IdempotencyKey: "evt-1", Attempt: 2}
		other := &deliver.Delivery{JobID: 2, Kind: "k", Attempt: 1}
		for _, d := range []*deliver.Delivery{first, retry, other, other} {
			if out := target.Deliver(t.Context(), d); out.Class != deliver.Completed {
				t.Fatalf("deliver job %d attempt %d: %v %v", d.JobID, d.Attempt, out.Class, out.Err)
			}
		}
		if n := b.msgs(t); n != 2 {
			t.Fatalf("stream holds %d messages, want 2 (duplicates dropped)", n)
		}
	})
	t.Run("no stream on the subject retries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		target, err := New(b.js, &Config{Subject: b.subject + ".nostream", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out := target.Deliver(t.Context(), &deliver.Delivery{JobID: 3, Kind: "k"})
		if out.Class != deliver.Retry || !errors.Is(out.Err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("outcome %v %v", out.Class, out.Err)
		}
	})
}
