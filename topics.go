package idem

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/webhook"
)

// Defaults of the topics.
const (
	// DefaultTopicQueue is the queue of the delivery jobs of topic events.
	DefaultTopicQueue = "topics"
	// DefaultEventRetention is how long the event log keeps an event.
	DefaultEventRetention = 90 * 24 * time.Hour
)

// Subscription is a webhook that receives the events of a topic. Each event
// becomes one delivery job per subscription (its own retries, attempt log
// and dead letter), partitioned by subscription and entity, so the events of
// one entity reach one subscription in order while a subscription that is
// down never holds back the others.
type Subscription struct {
	Tenant string // "" = the client's default tenant
	Topic  string // printable ASCII without spaces or '/'
	Name   string // unique per topic; printable ASCII without spaces or '/'
	URL    string
	// Secrets sign each push; never returned by SubscriptionList.
	Secrets     []webhook.Secret
	SecretCount int
	// KeepSecrets: when SubscriptionPut replaces a stored subscription, its
	// secrets are kept and Secrets is used only if the put creates it.
	KeepSecrets bool
	// EventTypes: only events of these types; none = every event (the
	// HTTP API calls it kinds).
	EventTypes []string
	Timeout    time.Duration
	// MaxAttempts is the number of attempts of each delivery job made for
	// the subscription, 1 to MaxMaxAttempts; 0 in SubscriptionPut =
	// Config.MaxAttempts. SubscriptionList and SubscriptionGet return the
	// number in use (Config.MaxAttempts for a subscription put with 0).
	MaxAttempts int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// TopicKindPrefix begins the kind of every delivery job of a topic's
// subscriptions: "topic:<topic>/<name>". Delivery matches such a job to the
// subscription by its kind and signs the push with the subscription's
// secrets, so the prefix is reserved: only the fan-out of Publish and
// EventReplay makes jobs of such a kind (and JobReplay copies them, kind
// and all). Every public enqueue (Enqueue, EnqueueRaw, EnqueueMany,
// EnqueueTx, BatchCreate, a schedule's job, POST /v1/jobs and
// /v1/jobs/batch) refuses a kind that starts with it: an *InvalidError on
// "kind".
const TopicKindPrefix = "topic:"

// subscriptionTarget names the stored target of a subscription: its name
// in the attempt log is "topic/name", the kind of its delivery jobs
// "topic:topic/name" (TopicKindPrefix).
func subscriptionTarget(topic, name string) (targetName, kind string) {
	return topic + "/" + name, TopicKindPrefix + topic + "/" + name
}

// SubscriptionPut creates or replaces a subscription and reports whether it
// was created.
func (c *Client) SubscriptionPut(ctx context.Context, s *Subscription) (bool, error) {
	if s == nil {
		return false, idemtype.Invalid("subscription", "nil")
	}
	if err := validateTopicName("topic", s.Topic); err != nil {
		return false, err
	}
	if err := validateTopicName("name", s.Name); err != nil {
		return false, err
	}
	for _, et := range s.EventTypes {
		if err := ValidateName("event_types", et); err != nil {
			return false, err
		}
	}
	if s.MaxAttempts < 0 || s.MaxAttempts > MaxMaxAttempts {
		return false, idemtype.Invalid("max_attempts", "must be between 1 and %d (0 = the default)", MaxMaxAttempts)
	}
	name, kind := subscriptionTarget(s.Topic, s.Name)
	return c.targetPut(ctx, &Target{Tenant: s.Tenant, Name: name, Kind: kind, URL: s.URL, Secrets: s.Secrets,
		KeepSecrets: s.KeepSecrets, Timeout: s.Timeout}, &subscriptionRow{topic: s.Topic, types: s.EventTypes, maxAttempts: s.MaxAttempts})
}

// validateTopicName checks a topic or subscription name: a name (see
// ValidateName) without '/', so that the stored target "topic/name" of a
// subscription names one topic and subscription only ("a" + "b/c" and
// "a/b" + "c" would both be "a/b/c"). Topics with '/' published before this
// rule can still be listed and replayed; they cannot have subscriptions.
func validateTopicName(field, v string) error {
	if err := ValidateName(field, v); err != nil {
		return err
	}
	if strings.Contains(v, "/") {
		return idemtype.Invalid(field, "must not contain '/'")
	}
	return nil
}

// SubscriptionList returns the subscriptions of a topic, by name, without
// their secrets.
func (c *Client) SubscriptionList(ctx context.Context, tenant, topic string) ([]*Subscription, error) {
	rows, err := c.subscriptions(ctx, c.tenant(tenant), topic)
	if err != nil {
		return nil, err
	}
	out := make([]*Subscription, len(rows))
	for i, r := range rows {
		out[i] = &Subscription{Tenant: r.Tenant, Topic: r.Topic, Name: r.Name[len(topic)+1:], URL: r.URL,
			SecretCount: len(r.Secrets), EventTypes: r.EventTypes, Timeout: r.Timeout,
			MaxAttempts: cmp.Or(r.MaxAttempts, c.cfg.MaxAttempts), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}

// SubscriptionGet returns one subscription without its secrets;
// ErrNotFound when there is none.
func (c *Client) SubscriptionGet(ctx context.Context, tenant, topic, name string) (*Subscription, error) {
	list, err := c.SubscriptionList(ctx, tenant, topic)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("subscription %s/%s: %w", topic, name, idemtype.ErrNotFound)
}

// SubscriptionDelete deletes a subscription; ErrNotFound when there is none.
// Its pending deliveries wait (retrying) for a subscription of that name.
func (c *Client) SubscriptionDelete(ctx context.Context, tenant, topic, name string) error {
	target, _ := subscriptionTarget(topic, name)
	return c.targetDelete(ctx, tenant, target, topic)
}

// subscriptions reads the stored subscriptions of a topic.
func (c *Client) subscriptions(ctx context.Context, tenant, topic string) ([]*store.DeliveryTarget, error) {
	rows, err := c.store.TargetList(ctx, &store.TargetListParams{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	var out []*store.DeliveryTarget
	for _, r := range rows {
		if r.Topic == topic {
			out = append(out, r)
		}
	}
	return out, nil
}

// Event is one event published to a topic.
type Event = store.Event

// PublishResult is the outcome of Publish.
type PublishResult struct {
	Event *Event
	// Existing: the key was published before; Event is that event and no
	// event was added (its missing deliveries, if any, were created).
	Existing bool
	// Deliveries is how many subscriptions the event goes to.
	Deliveries int
}

// EventEnvelope is the args of a delivery job, and so the "args" a
// subscriber receives (docs/topics.md).
type EventEnvelope struct {
	EventID      string          `json:"event_id"`
	Topic        string          `json:"topic"`
	Type         string          `json:"type,omitempty"`
	Key          string          `json:"key,omitempty"`
	PartitionKey string          `json:"partition_key,omitempty"`
	Payload      json.RawMessage `json:"payload"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	// ReplayOf is set on a replay: the id of the original event.
	ReplayOf string `json:"replay_of,omitempty"`
}

// maxClockSkew is the most a node's clock is taken to run ahead of
// another's (the hour idem assumes elsewhere, docs/indexes.md): Publish
// moves an event's CreatedAt up to a subscription's created that far
// ahead, no further — a clock further off is broken, and must not move
// every later event's time.
const maxClockSkew = time.Hour

// Publish appends an event to the topic's event log and creates one
// delivery job per subscription whose event types match. A repeated Key
// with the same event (type, partition key, payload and metadata, the JSON
// in canonical form) returns the existing event (Existing) and creates
// only the deliveries it lacks; with a different one it fails with a
// *KeyReusedError (ErrKeyReused) and creates nothing. So a publish
// retried after a crash completes its fan-out; a repeat later than the
// delivery keys' dedup window and result TTL (7 days each by default)
// creates none, since nothing would stop a second push then.
func (c *Client) Publish(ctx context.Context, e *Event) (*PublishResult, error) {
	if e == nil {
		return nil, idemtype.Invalid("event", "nil")
	}
	ev := *e
	now := c.now()
	ev.Tenant, ev.CreatedAt = c.tenant(ev.Tenant), now
	if len(ev.Payload) == 0 {
		ev.Payload = json.RawMessage("null")
	}
	if err := validateEvent(&ev); err != nil {
		return nil, err
	}
	subs, err := c.subscriptions(ctx, ev.Tenant, ev.Topic)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	for _, s := range subs {
		if typeMatches(s.EventTypes, ev.Type) {
			ev.Deliveries++
			// The event is created no earlier than the subscriptions it
			// goes to: a repeat (below) takes those created at or before
			// it, and one created on a node whose clock runs ahead, or
			// since this node read its clock, must be among them.
			if s.CreatedAt.After(ev.CreatedAt) && s.CreatedAt.Sub(now) <= maxClockSkew {
				ev.CreatedAt = s.CreatedAt
			}
		}
	}
	stored, existing, err := c.store.EventInsert(ctx, &ev)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	// A repeat creates only the deliveries the event lacks among the
	// subscriptions that existed when it was first published (created at
	// or before the event, whose CreatedAt is at least theirs), completing
	// a fan-out cut short by a crash; a subscription created since never
	// gets the old event (Replay sends it on purpose).
	var before time.Time
	if existing {
		same, err := sameEvent(stored, &ev)
		if err != nil {
			return nil, fmt.Errorf("publish: compare with event %d: %w", stored.ID, err)
		}
		if !same {
			return nil, fmt.Errorf("publish: %w", &idemtype.KeyReusedError{Key: ev.Key, EventID: stored.ID})
		}
		before = stored.CreatedAt
	}
	n, err := c.fanOut(ctx, stored, "", false, "", before)
	if err != nil {
		return nil, fmt.Errorf("publish event %d: %w", stored.ID, err)
	}
	return &PublishResult{Event: stored, Existing: existing, Deliveries: n}, nil
}

// sameEvent reports whether e, published again with the key of stored,
// is the same event: the same type, partition key, payload and metadata,
// the JSON compared in canonical form (key order and white space do not
// matter; absent, null and {} metadata are the same), as a job's fields
// are for its key (fingerprint). A different one is a key reused.
func sameEvent(stored, e *Event) (bool, error) {
	if stored.Type != e.Type || stored.PartitionKey != e.PartitionKey {
		return false, nil
	}
	same, err := sameJSON(stored.Payload, e.Payload)
	if err != nil || !same {
		return false, err
	}
	if noMetadata(stored.Metadata) && noMetadata(e.Metadata) {
		return true, nil
	}
	return sameJSON(stored.Metadata, e.Metadata)
}

// sameJSON reports whether two JSON texts have the same canonical form; an
// empty text is null.
func sameJSON(a, b json.RawMessage) (bool, error) {
	canon := func(m json.RawMessage) ([]byte, error) {
		if len(m) == 0 {
			m = json.RawMessage("null")
		}
		return key.Canonicalize(m)
	}
	ca, err := canon(a)
	if err != nil {
		return false, fmt.Errorf("canonical form of the stored event: %w", err)
	}
	cb, err := canon(b)
	if err != nil {
		return false, fmt.Errorf("canonical form of the event: %w", err)
	}
	return string(ca) == string(cb), nil
}

// validateEvent checks what Publish is given. The payload and metadata
// travel in the args of every delivery job of the event (EventEnvelope),
// so they must pass the rule of a job's args (ValidateJSON), and so must
// the largest envelope the event can have (a replay's, of the longest id
// and time): checked before the event is stored, so that a publish is
// refused whole instead of storing an event whose fan-out, and every
// replay, fails.
func validateEvent(e *Event) error {
	if err := validateTopicName("topic", e.Topic); err != nil {
		return err
	}
	for field, v := range map[string]string{"type": e.Type, "key": e.Key, "partition_key": e.PartitionKey} {
		if v == "" {
			continue
		}
		if err := ValidateKey(field, v); err != nil {
			return err
		}
	}
	if err := ValidateJSON("payload", e.Payload); err != nil {
		return err
	}
	if len(e.Metadata) > 0 {
		if err := ValidateJSON("metadata", e.Metadata); err != nil {
			return err
		}
	}
	if err := store.EventCheck(e); err != nil {
		return err
	}
	widest := *e
	widest.ID, widest.CreatedAt = math.MaxInt64, widestTime
	env, err := eventArgs(&widest, true)
	if err != nil {
		return idemtype.Invalid("payload", "%v", err)
	}
	if err := ValidateJSON("payload", env); err != nil {
		return idemtype.Invalid("payload", "with the event's fields around it (the args of its deliveries): %s", reasonOf(err))
	}
	return nil
}

// widestTime is the time whose RFC 3339 form is the longest, for the
// largest envelope of an event (validateEvent).
var widestTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -11*3600))

// reasonOf is the reason of an *idemtype.InvalidError, else its text.
func reasonOf(err error) string {
	var inv *idemtype.InvalidError
	if errors.As(err, &inv) {
		return inv.Reason
	}
	return err.Error()
}

// eventArgs is the args of a delivery job of ev (its EventEnvelope); a
// replay's carry replay_of.
func eventArgs(ev *Event, replay bool) (json.RawMessage, error) {
	env := EventEnvelope{EventID: strconv.FormatInt(ev.ID, 10), Topic: ev.Topic, Type: ev.Type, Key: ev.Key,
		PartitionKey: ev.PartitionKey, Payload: ev.Payload, Metadata: ev.Metadata, CreatedAt: ev.CreatedAt}
	if replay {
		env.ReplayOf = env.EventID
	}
	args, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return args, nil
}

// fanOut enqueues the deliveries of ev: to every matching subscription, or
// to the one named only. A replay makes new deliveries that reference the
// original, keyed by replayKey when it is not "" (eventReplayKey), else
// without a key; a publish makes keyed ones, one per event and
// subscription. When before is not zero, only subscriptions created at or
// before it take part.
func (c *Client) fanOut(ctx context.Context, ev *Event, only string, replay bool, replayKey string, before time.Time) (int, error) {
	subs, err := c.subscriptions(ctx, ev.Tenant, ev.Topic)
	if err != nil {
		return 0, err
	}
	args, err := eventArgs(ev, replay)
	if err != nil {
		return 0, err
	}
	eventID := strconv.FormatInt(ev.ID, 10)
	var ps []EnqueueParams
	settled := 0 // deliveries of a repeat left alone: see the comment below
	for _, s := range subs {
		sub := s.Name[len(ev.Topic)+1:]
		if (only != "" && sub != only) || !typeMatches(s.EventTypes, ev.Type) || (!before.IsZero() && s.CreatedAt.After(before)) {
			continue
		}
		_, kind := subscriptionTarget(ev.Topic, sub)
		if !before.IsZero() && c.now().Sub(before) >= max(c.cfg.DedupWindow, c.cfg.resultTTL(kind)) {
			// A repeat after both the dedup window and the result TTL of
			// the delivery key: neither the key nor a cached result is
			// left to stop a second push of a delivered event, so the
			// fan-out is not completed any more (Replay sends it on
			// purpose).
			settled++
			continue
		}
		meta, _ := json.Marshal(map[string]any{"event_id": eventID, "topic": ev.Topic, "subscription": sub, "replay": replay})
		opts := &EnqueueOpts{Tenant: ev.Tenant, Queue: c.cfg.TopicQueue, Metadata: meta, MaxAttempts: s.MaxAttempts}
		if ev.PartitionKey != "" {
			opts.PartitionKey = fitKey(sub + "/" + ev.PartitionKey)
		}
		switch {
		case !replay:
			opts.IdempotencyKey = fitKey("event-" + eventID + "/" + sub)
		case replayKey != "":
			opts.IdempotencyKey = eventReplayKey(replayKey, ev.ID, sub)
		}
		ps = append(ps, EnqueueParams{Kind: kind, Args: args, Opts: opts})
	}
	// At most MaxBatch jobs per insert: a topic may have more
	// subscriptions. A publish cut off between two chunks is completed by
	// its repeat, as after a crash (its deliveries are keyed). The
	// deliveries are EnqueueMany's but for their kinds, which it refuses
	// (TopicKindPrefix).
	for chunk := range slices.Chunk(ps, MaxBatch) {
		res, err := c.enqueueAll(ctx, chunk, c.store.JobInsertMany, byFanOut)
		if err != nil {
			return 0, err
		}
		for _, r := range res {
			// A delivery key reused with another request is a delivery made
			// before the subscription changed (its max_attempts): it exists,
			// which is all a repeated publish has to make sure of.
			if r.Err != nil && !((!replay || replayKey != "") && errors.Is(r.Err, idemtype.ErrKeyReused)) {
				return 0, r.Err
			}
		}
	}
	return settled + len(ps), nil
}

// eventReplayKey is the idempotency key of the replay delivery of event id
// to subscription sub made by the replay named key: "replay:", 32 hex
// digits of the SHA-256 of key (as ReplayCopyKey), ":event-", the id, "/"
// and sub (fitKey).
func eventReplayKey(key string, id int64, sub string) string {
	sum := sha256.Sum256([]byte(key))
	return fitKey("replay:" + hex.EncodeToString(sum[:16]) + ":event-" + strconv.FormatInt(id, 10) + "/" + sub)
}

// fitKey returns k when it fits a job's key (MaxKeyLength bytes), else
// "sha256:" and the hex SHA-256 of k: the partition key "subscription/entity"
// or the key "event-<id>/subscription" of a delivery job built from names
// and keys that may each be as long as a key, so that such an event is
// delivered (in one partition per entity) instead of failing its publish
// after the event was stored.
func fitKey(k string) string { return key.Fit(k, MaxKeyLength) }

// typeMatches reports whether a subscription with filter types takes an
// event of type t.
func typeMatches(types []string, t string) bool {
	if len(types) == 0 {
		return true
	}
	for _, x := range types {
		if x == t {
			return true
		}
	}
	return false
}

// EventFilter selects events of the log for EventList and Replay.
type EventFilter struct {
	Tenant       string // "" = the default tenant
	Topic        string // required
	PartitionKey string // the entity
	Types        []string
	// MetaKey and MetaValue: the metadata's top-level MetaKey is the string
	// MetaValue.
	MetaKey, MetaValue string
	From, To           time.Time // CreatedAt in [From, To); zero = open
}

func (f *EventFilter) params(tenant string) *store.EventListParams {
	return &store.EventListParams{Tenant: tenant, Topic: f.Topic, PartitionKey: f.PartitionKey, Types: f.Types,
		MetaKey: f.MetaKey, MetaValue: f.MetaValue, From: f.From, To: f.To}
}

// EventList returns up to limit events of the log matching f after the
// event afterID, oldest first.
func (c *Client) EventList(ctx context.Context, f *EventFilter, afterID int64, limit int) ([]*Event, error) {
	if f == nil {
		f = &EventFilter{}
	}
	if err := ValidateName("topic", f.Topic); err != nil {
		return nil, err
	}
	p := f.params(c.tenant(f.Tenant))
	p.AfterID, p.Limit = afterID, min(max(limit, 1), store.MaxBatch)
	return c.store.EventList(ctx, p)
}

// ReplayResult counts a replay.
type ReplayResult struct {
	Events     int // events of the log replayed
	Deliveries int // delivery jobs created
}

// EventReplay delivers again the events f selects, oldest first, to every
// current subscription whose types match, or only to subscription when not
// "" (ErrNotFound when the topic has no such subscription). Replays are new
// delivery jobs (new webhook-id) whose args carry replay_of, the original
// event's id. Each event's deliveries are written
// in their own transaction: a failure part-way leaves the earlier events'
// deliveries, and a retry delivers them again; EventReplayKeyed does not.
func (c *Client) EventReplay(ctx context.Context, f *EventFilter, subscription string) (*ReplayResult, error) {
	return c.EventReplayKeyed(ctx, f, subscription, "")
}

// EventReplayKeyed is EventReplay named by key (idem serve passes the
// request's Idempotency-Key; "" = EventReplay): every replay delivery gets
// an idempotency key made of key, the event's id and the subscription, so a
// replay retried with the same key after a failure part-way delivers no
// event twice: the deliveries the failed attempt made are counted, not
// made again (within the dedup window).
func (c *Client) EventReplayKeyed(ctx context.Context, f *EventFilter, subscription, key string) (*ReplayResult, error) {
	if f == nil {
		f = &EventFilter{}
	}
	if err := ValidateName("topic", f.Topic); err != nil {
		return nil, err
	}
	p := f.params(c.tenant(f.Tenant))
	if subscription != "" {
		// A replay to a subscription the topic lacks (a typo, one deleted,
		// one of another topic) would walk the log and deliver nothing,
		// answering as if it had replayed.
		if _, err := c.SubscriptionGet(ctx, p.Tenant, f.Topic, subscription); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	var out ReplayResult
	for {
		evs, err := c.store.EventList(ctx, p)
		if err != nil {
			return &out, fmt.Errorf("replay: %w", err)
		}
		for _, ev := range evs {
			n, err := c.fanOut(ctx, ev, subscription, true, key, time.Time{})
			if err != nil {
				return &out, fmt.Errorf("replay event %d: %w", ev.ID, err)
			}
			out.Events++
			out.Deliveries += n
		}
		if len(evs) < store.MaxBatch {
			return &out, nil
		}
		p.AfterID = evs[len(evs)-1].ID
	}
}
