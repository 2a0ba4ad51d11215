package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// Targets stores the delivery targets of the runtime: webhook URLs that
// the jobs of a queue or a kind are pushed to instead of a Go handler.
type Targets interface {
	// TargetPut creates or replaces the target (Tenant, Name) and reports
	// whether it was created (there was no row, whatever the clock says).
	// CreatedAt is kept on a replace. A row of another Topic (a
	// subscription for a plain target, or the reverse) is not replaced:
	// TargetNameTaken, an ErrInvalid.
	TargetPut(ctx context.Context, t *DeliveryTarget) (created bool, err error)
	// TargetList lists the targets of Tenant ("" = all), by tenant and name.
	TargetList(ctx context.Context, p *TargetListParams) ([]*DeliveryTarget, error)
	// TargetDelete deletes the target (Tenant, Name); ErrNotFound when there
	// is none.
	TargetDelete(ctx context.Context, p *TargetDeleteParams) error
	// AttemptDeliveryList returns the ended attempts that name a target
	// (Attempt.Target != ""), of jobs of Tenant ("" = all), finished at or
	// after Since, newest first, at most Limit (<= 0 = MaxBatch): the
	// delivery log the per-target statistics are computed from. Each
	// carries its job's tenant: targets are per tenant, so two tenants'
	// targets of one name are told apart by it.
	AttemptDeliveryList(ctx context.Context, p *AttemptDeliveryListParams) ([]*DeliveryAttempt, error)
}

// Events is the event log of the topics: every published event, kept for
// the event retention (90 days by default), independent of the delivery
// jobs made from it.
type Events interface {
	// EventInsert appends an event. With a Key, an event of the same
	// (Tenant, Topic, Key) that exists is returned instead with existing =
	// true (decided by a unique constraint). ID and CreatedAt are set. An
	// ID is never given twice, even after EventDeleteBefore deleted the
	// newest events (delivery jobs are keyed by it). EventCheck refuses
	// bad events with ErrInvalid, NUL (\u0000) in Payload or Metadata
	// included.
	EventInsert(ctx context.Context, e *Event) (ev *Event, existing bool, err error)
	// EventList returns the events of Tenant and Topic matching the
	// filter, oldest first (by ID), after AfterID, at most Limit.
	EventList(ctx context.Context, p *EventListParams) ([]*Event, error)
}

// Event is one published event.
type Event struct {
	ID           int64
	Tenant       string
	Topic        string
	Key          string // "" = not deduplicated
	Type         string
	PartitionKey string // the entity; "" = none
	Payload      json.RawMessage
	Metadata     json.RawMessage // a JSON object or nil
	CreatedAt    time.Time
	// Deliveries is how many subscriptions the event was fanned out to
	// when it was published (replays not counted).
	Deliveries int
}

// EventListParams filters the event log. Zero fields do not filter.
type EventListParams struct {
	Tenant       string
	Topic        string
	PartitionKey string
	Types        []string
	// MetaKey and MetaValue: the metadata's top-level MetaKey is the string
	// MetaValue.
	MetaKey, MetaValue string
	From, To           time.Time // CreatedAt >= From, < To
	AfterID            int64
	Limit              int // <= 0 = MaxBatch
}

// EventDeleteBeforeParams bounds one EventDeleteBefore call.
type EventDeleteBeforeParams struct {
	Before time.Time
	Limit  int // <= 0 = MaxBatch
}

// AttemptDeliveryListParams selects recent delivery attempts.
type AttemptDeliveryListParams struct {
	Tenant string // "" = every tenant
	Since  time.Time
	Limit  int
}

// DeliveryAttempt is one attempt of AttemptDeliveryList with the tenant of
// its job, whose target (Attempt.Target) it names.
type DeliveryAttempt struct {
	idemtype.Attempt
	Tenant string
}

// DeliveryTarget is a stored push target. A job matches it when its tenant
// is Tenant and its queue and kind equal Queue and Kind where these are set;
// at least one of them is set.
type DeliveryTarget struct {
	Tenant  string
	Name    string
	Queue   string // "" = any queue
	Kind    string // "" = any kind
	URL     string
	Secrets []string // whsec_… secrets, the first signs first; stored as given
	// KeepSecrets: when TargetPut replaces a row, its stored Secrets are
	// kept and these are ignored (used only when the row is created), in
	// the same statement. Not stored.
	KeepSecrets bool
	// Topic makes the target a subscription of that topic (its name is the
	// subscription's); EventTypes filters the events it gets (none = all).
	Topic      string
	EventTypes []string
	// Timeout bounds one push; 0 = the sender's default.
	Timeout time.Duration
	// MaxAttempts is the number of attempts of each delivery job made for
	// a subscription; 0 = the client's default. Negative is refused.
	MaxAttempts int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// TargetListParams scopes TargetList.
type TargetListParams struct {
	Tenant string // "" = every tenant
}

// TargetDeleteParams selects the target TargetDelete deletes.
type TargetDeleteParams struct {
	Tenant string
	Name   string
}
