// Package deliver is the seam between the executor and the systems a job can
// be delivered to: a [Target] receives a [Delivery] and answers with an
// [Outcome] that says whether the job completed, should be retried or is
// dead. Implementations: [Webhook] (HTTP push per Standard Webhooks) and
// natstarget (NATS JetStream). Another broker slots in behind Target.
package deliver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// Target delivers one attempt of a job. Deliver must not panic on a
// transport failure; it reports it in the Outcome.
type Target interface {
	Deliver(ctx context.Context, d *Delivery) Outcome
}

// Delivery is one attempt of a job bound for a target.
type Delivery struct {
	JobID          int64
	Kind           string
	Args           json.RawMessage // JSON; "{}" when empty
	Attempt        int             // 1 for the first attempt
	IdempotencyKey string          // "" when the job has none
	PartitionKey   string          // "" when the job has none
	Tenant         string          // the job's tenant; "" = idemtype.DefaultTenant
}

// MessageID identifies the message across attempts, for the receiver's or
// broker's deduplication (webhook-id, Nats-Msg-Id). When the idempotency
// key is printable ASCII without spaces (at most 255 bytes) it is the key
// for a job of the default tenant, and "<tenant> <key>" (the tenant, a
// space, the key) for a job of any other tenant: keys are unique within a
// tenant only, and a receiver or stream shared by tenants must not take two
// tenants' jobs of one key for one message. Neither tenant names nor such
// keys hold a space, so the id of one (tenant, key) is never the id of
// another, nor a default tenant's key. Otherwise it is "job_<id>" (job ids
// are unique across tenants).
func (d *Delivery) MessageID() string {
	k := d.IdempotencyKey
	if k == "" || len(k) > 255 || !printable(k) {
		return "job_" + strconv.FormatInt(d.JobID, 10)
	}
	if d.Tenant == "" || d.Tenant == idemtype.DefaultTenant {
		return k
	}
	return d.Tenant + " " + k
}

// printable reports whether s is visible ASCII only.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Payload is the JSON body sent to every target; docs/webhooks.md documents
// it for receivers.
type Payload struct {
	JobID          int64           `json:"job_id"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	Attempt        int             `json:"attempt"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	PartitionKey   string          `json:"partition_key,omitempty"`
}

// Payload encodes the delivery's body.
func (d *Delivery) Payload() ([]byte, error) {
	args := d.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	b, err := json.Marshal(Payload{
		JobID: d.JobID, Kind: d.Kind, Args: args, Attempt: d.Attempt,
		IdempotencyKey: d.IdempotencyKey, PartitionKey: d.PartitionKey,
	})
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	return b, nil
}

// Class is what the executor does with the job after a delivery.
type Class int

// The classes of an [Outcome].
const (
	// Completed: the target accepted the job; Outcome.Result is its result.
	Completed Class = iota + 1
	// Retry: retry with backoff, no sooner than Outcome.RetryAfter.
	Retry
	// Dead: retrying cannot help; the job goes to the DLQ.
	Dead
)

// String names the class.
func (c Class) String() string {
	switch c {
	case Completed:
		return "completed"
	case Retry:
		return "retry"
	case Dead:
		return "dead"
	default:
		return "Class(" + strconv.Itoa(int(c)) + ")"
	}
}

// Outcome is the result of one delivery.
type Outcome struct {
	Class      Class
	Result     []byte        // JSON or text the target answered (the job's result when Completed)
	Truncated  bool          // Result was cut at the target's limit
	RetryAfter time.Duration // the target's requested delay; 0 when none
	Latency    time.Duration
	Status     int   // HTTP status for webhooks; 0 otherwise
	Err        error // nil only when Completed
}
