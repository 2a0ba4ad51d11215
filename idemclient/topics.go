package idemclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// Subscription is a topic subscription as the API shows it (Secret: a
// generated one, in the reply that created it only; a password or NATS
// token in URL masked; MaxAttempts: the number in use).
type Subscription = wire.Subscription

// SubscriptionPut is the body of PutSubscription. Secret nil: the server
// generates one and returns it once when it creates the subscription, and
// keeps the stored secrets when it replaces it (retrying or re-applying a
// PutSubscription never rotates them); a given secret replaces them; a
// pointer to "": unsigned pushes. Kinds filters the event types
// (EventTypes is its former name, still accepted by the server);
// MaxAttempts is the number of attempts of each delivery (0 = the
// server's default).
type SubscriptionPut = wire.SubscriptionPut

// PublishRequest is one event to publish.
type PublishRequest = wire.PublishRequest

// PublishReply is the outcome of Publish.
type PublishReply = wire.PublishReply

// Event is one event of the event log.
type Event = wire.Event

// EventReplayRequest selects the events Replay delivers again.
type EventReplayRequest = wire.EventReplayRequest

// EventReplayReply counts a replay.
type EventReplayReply = wire.EventReplayReply

func topicPath(topic, suffix string) string { return "/v1/topics/" + pathSegment(topic) + suffix }

// PutSubscription creates or replaces a subscription. The server answers
// 200 either way (API.md); created reports that this PUT created it: its
// created_at equals its updated_at (or, from an older server, a 201).
//
// A nil s is sent as an empty one: the server names what is missing.
func (cl *Client) PutSubscription(ctx context.Context, topic, name string, s *SubscriptionPut) (*Subscription, bool, error) {
	if s == nil {
		s = &SubscriptionPut{} // not null, which the server refuses as such
	}
	var out Subscription
	status, err := cl.do(ctx, &call{method: http.MethodPut, path: topicPath(topic, "/subscriptions/"+pathSegment(name)), body: s, out: &out})
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated || out.CreatedAt.Equal(out.UpdatedAt), nil
}

// Subscriptions lists the subscriptions of a topic.
func (cl *Client) Subscriptions(ctx context.Context, topic string) ([]*Subscription, error) {
	var out wire.SubscriptionList
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: topicPath(topic, "/subscriptions"), out: &out})
	return out.Subscriptions, err
}

// Subscription returns one subscription of a topic (its secret is never
// shown); ErrNotFound when the topic has none of that name.
func (cl *Client) Subscription(ctx context.Context, topic, name string) (*Subscription, error) {
	var out Subscription
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: topicPath(topic, "/subscriptions/"+pathSegment(name)), out: &out})
	return nilIfErr(&out, err)
}

// DeleteSubscription deletes a subscription.
//
// A retry after a lost reply that finds it gone (404) reports success: the
// earlier attempt may have deleted it. So nil means "it is gone", and
// ErrNotFound is reported only when the first attempt answers 404.
func (cl *Client) DeleteSubscription(ctx context.Context, topic, name string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: topicPath(topic, "/subscriptions/"+pathSegment(name))})
	return err
}

// Publish publishes an event to a topic. Without e.Key every call is a
// new event; its retries after a lost reply carry one random
// Idempotency-Key, which the server takes as the event key, so they
// publish it once. With e.Key the body key alone deduplicates. A repeat of
// a key with a different event (type, partition key, payload or metadata)
// fails with ErrKeyReused (422). A payload
// the server's JSON rule refuses (see Complete) is refused before sending
// (ErrInvalid naming payload); a nil payload is sent as JSON null, an
// event whose payload is null (as idem.Client.Publish takes an empty one).
func (cl *Client) Publish(ctx context.Context, topic string, e *PublishRequest) (*PublishReply, error) {
	if e == nil {
		return nil, idemtype.Invalid("event", "required")
	}
	if err := checkDocument("payload", e.Payload); err != nil {
		return nil, fmt.Errorf("idemclient: publish to %q: %w", topic, err)
	}
	var out PublishReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: topicPath(topic, "/events"), body: e, out: &out, bodyKey: e.Key != ""})
	return nilIfErr(&out, err)
}

// Events returns a page of the event log of a topic, oldest first, and the
// cursor of the next page ("" on the last).
func (cl *Client) Events(ctx context.Context, topic, partitionKey string, types []string, limit int, cursor string) ([]*Event, string, error) {
	q := url.Values{}
	if partitionKey != "" {
		q.Set("partition_key", partitionKey)
	}
	for _, t := range types {
		q.Add("type", t)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out wire.EventList
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: topicPath(topic, "/events"), query: q, out: &out})
	return out.Events, out.NextCursor, err
}

// ReplayEvents delivers the selected events of a topic again. A nil r is
// the empty selection, every event of the topic (as the TypeScript and PHP
// clients' default): the server refuses a body of null.
func (cl *Client) ReplayEvents(ctx context.Context, topic string, r *EventReplayRequest) (*EventReplayReply, error) {
	if r == nil {
		r = &EventReplayRequest{}
	}
	var out EventReplayReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: topicPath(topic, "/replay"), body: r, out: &out})
	return nilIfErr(&out, err)
}
