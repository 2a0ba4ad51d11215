// Package natstarget delivers jobs by publishing them to NATS JetStream. The
// message carries Nats-Msg-Id set to the delivery's message id, so the
// stream drops a duplicate published within its duplicate window (2 minutes
// by default); the publish acknowledgement completes the delivery and any
// error retries it.
package natstarget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/internal/deliver"
)

// DefaultTimeout bounds one publish when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Config configures a [Target].
type Config struct {
	// Subject the jobs are published to; a stream must capture it. Required.
	Subject string
	// Timeout bounds one publish and its acknowledgement. Default DefaultTimeout.
	Timeout time.Duration
}

// Target publishes deliveries to one subject.
type Target struct {
	js      jetstream.JetStream
	subject string
	timeout time.Duration
}

// New returns a target publishing through js.
func New(js jetstream.JetStream, cfg *Config) (*Target, error) {
	if js == nil || cfg == nil || cfg.Subject == "" {
		return nil, errors.New("natstarget: needs a JetStream context and a subject")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("natstarget: negative timeout")
	}
	t := &Target{js: js, subject: cfg.Subject, timeout: cfg.Timeout}
	if t.timeout == 0 {
		t.timeout = DefaultTimeout
	}
	return t, nil
}

// Ack is the Result of a completed delivery.
type Ack struct {
	Stream    string `json:"stream"`
	Sequence  uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"` // the stream already held this message id
}

// Deliver publishes d once and waits for the stream's acknowledgement.
func (t *Target) Deliver(ctx context.Context, d *deliver.Delivery) deliver.Outcome {
	body, err := d.Payload()
	if err != nil {
		return deliver.Outcome{Class: deliver.Dead, Err: err}
	}
	msg := nats.NewMsg(t.subject)
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, d.MessageID())
	msg.Header.Set("Idem-Job-Id", strconv.FormatInt(d.JobID, 10))
	msg.Header.Set("Idem-Kind", d.Kind)
	msg.Header.Set("Idem-Attempt", strconv.Itoa(d.Attempt))
	if d.PartitionKey != "" {
		msg.Header.Set("Idem-Partition-Key", d.PartitionKey)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	start := time.Now()
	ack, err := t.js.PublishMsg(ctx, msg)
	latency := time.Since(start)
	if err != nil {
		return deliver.Outcome{Class: deliver.Retry, Latency: latency, Err: fmt.Errorf("publish %s: %w", t.subject, err)}
	}
	result, err := json.Marshal(Ack{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate})
	if err != nil {
		return deliver.Outcome{Class: deliver.Retry, Latency: latency, Err: fmt.Errorf("encode ack: %w", err)}
	}
	return deliver.Outcome{Class: deliver.Completed, Result: result, Latency: latency}
}
