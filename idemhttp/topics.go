package idemhttp

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/internal/redact"
	"github.com/idem-dev/idem/webhook"
)

// pathTopic returns the {topic} path value, validated.
func pathTopic(r *http.Request) (string, error) {
	t := r.PathValue("topic")
	if err := idem.ValidateName("topic", t); err != nil {
		return "", err
	}
	return t, nil
}

// pathSubscription returns the {topic} and {name} path values, validated.
func pathSubscription(r *http.Request) (topic, name string, err error) {
	if topic, err = pathTopic(r); err != nil {
		return "", "", err
	}
	name, err = pathName(r)
	return topic, name, err
}

// putSubscription creates or replaces a subscription: 200 either way, as
// API.md's table says (unlike a target's PUT, 201 on create). Without
// a secret, one is generated when the put creates it (in that reply, once)
// and the stored ones are kept when it replaces it, so a repeated PUT
// never rotates them; a given secret replaces them, "" = unsigned.
func (s *Server) putSubscription(w http.ResponseWriter, r *http.Request) error {
	topic, name, err := pathSubscription(r)
	if err != nil {
		return err
	}
	body, err := readBody(r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	var req wire.SubscriptionPut
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.MaxAttempts < 0 || req.MaxAttempts > idem.MaxMaxAttempts || explicitZero(body, "max_attempts") {
		return invalid("max_attempts", fmt.Sprintf("must be between 1 and %d", idem.MaxMaxAttempts))
	}
	kinds, err := subscriptionKinds(&req)
	if err != nil {
		return err
	}
	timeout, err := parseDuration("timeout", req.Timeout)
	if err != nil {
		return err
	}
	sub := &idem.Subscription{Tenant: tenantOf(r), Topic: topic, Name: name, URL: req.URL, EventTypes: kinds,
		MaxAttempts: req.MaxAttempts}
	if timeout != nil {
		sub.Timeout = *timeout
	}
	var generated webhook.Secret
	switch {
	case req.Secret == nil:
		generated = newSecret()
		sub.Secrets, sub.KeepSecrets = []webhook.Secret{generated}, true
	case *req.Secret != "":
		sec, err := webhook.ParseSecret(*req.Secret)
		if err != nil {
			return invalid("secret", "want whsec_ followed by base64")
		}
		sub.Secrets = []webhook.Secret{sec}
	}
	created, err := s.client.SubscriptionPut(r.Context(), sub)
	if err != nil {
		return err
	}
	got, err := s.client.SubscriptionGet(r.Context(), sub.Tenant, topic, name)
	if err != nil {
		return err
	}
	out := renderSubscription(got)
	if created && !generated.IsZero() {
		out.Secret = generated.Reveal()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// subscriptionKinds is the event-type filter of a PUT: kinds (API.md's
// name) or event_types (its former name); both may be given only with the
// same types.
func subscriptionKinds(req *wire.SubscriptionPut) ([]string, error) {
	switch {
	case req.Kinds == nil:
		return req.EventTypes, nil
	case req.EventTypes == nil:
		return req.Kinds, nil
	}
	a, b := slices.Clone(req.Kinds), slices.Clone(req.EventTypes)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(slices.Compact(a), slices.Compact(b)) {
		return nil, invalid("kinds", "differs from event_types (its former name); give one of them")
	}
	return req.Kinds, nil
}

func (s *Server) getSubscription(w http.ResponseWriter, r *http.Request) error {
	topic, name, err := pathSubscription(r)
	if err != nil {
		return err
	}
	sub, err := s.client.SubscriptionGet(r.Context(), tenantOf(r), topic, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderSubscription(sub))
	return nil
}

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) error {
	topic, err := pathTopic(r)
	if err != nil {
		return err
	}
	list, err := s.client.SubscriptionList(r.Context(), tenantOf(r), topic)
	if err != nil {
		return err
	}
	out := wire.SubscriptionList{Subscriptions: make([]*wire.Subscription, 0, len(list))}
	for _, sub := range list {
		out.Subscriptions = append(out.Subscriptions, renderSubscription(sub))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request) error {
	topic, name, err := pathSubscription(r)
	if err != nil {
		return err
	}
	if err := s.client.SubscriptionDelete(r.Context(), tenantOf(r), topic, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// publish appends an event: 201, or 200 with Idempotent-Replayed when its
// key was published before. The key is the body's key, else the
// Idempotency-Key header, so a retry with the header key publishes once.
// A header key and a different body key are a 400 naming key, as on
// POST /v1/jobs and /v1/batches (the body's used to win silently).
func (s *Server) publish(w http.ResponseWriter, r *http.Request) error {
	topic, err := pathTopic(r)
	if err != nil {
		return err
	}
	hk, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	var req wire.PublishRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	switch {
	case hk != "" && req.Key != "" && req.Key != hk:
		// A body key no header can carry (the TypeScript and PHP clients
		// then send a random header key) is named for what it is.
		if err := idem.ValidateKey("key", req.Key); err != nil {
			return err
		}
		return invalid("key", "differs from the Idempotency-Key header")
	case req.Key == "":
		req.Key = hk
	}
	if len(req.Payload) == 0 {
		return invalid("payload", "required")
	}
	res, err := s.client.Publish(r.Context(), &idem.Event{Tenant: tenantOf(r), Topic: topic, Key: req.Key, Type: req.Type,
		PartitionKey: req.PartitionKey, Payload: req.Payload, Metadata: rawOrNil(req.Metadata)})
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Existing {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, wire.PublishReply{EventID: formatID(res.Event.ID), Deliveries: res.Deliveries, Existing: res.Existing})
	return nil
}

// listEvents pages through the event log of a topic, oldest first.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	topic, err := pathTopic(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	// An empty partition_key or type is no value, not "any" (it selected
	// the events without one); type is repeated for several types.
	pk, _, err := queryValue(q, "partition_key")
	if err != nil {
		return err
	}
	types, err := queryItems(q, "type")
	if err != nil {
		return err
	}
	for _, name := range []string{"limit", "cursor"} {
		if err := queryOnce(q, name); err != nil {
			return err
		}
	}
	f := &idem.EventFilter{Tenant: tenantOf(r), Topic: topic, PartitionKey: pk, Types: types}
	limit := 50
	if q.Has("limit") { // limit= (empty) is no number, not the default
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > 500 {
			return invalid("limit", "must be an integer from 1 to 500")
		}
		limit = n
	}
	var after int64
	if v := q.Get("cursor"); v != "" {
		id, ok := parseID(v)
		if !ok {
			return invalid("cursor", "malformed cursor")
		}
		after = id
	}
	// One more than the page tells whether another page follows: the last
	// page carries no next_cursor (API.md), even when it is full.
	evs, err := s.client.EventList(r.Context(), f, after, limit+1)
	if err != nil {
		return err
	}
	more := len(evs) > limit
	evs = evs[:min(len(evs), limit)]
	out := wire.EventList{Events: make([]*wire.Event, 0, len(evs))}
	for _, e := range evs {
		out.Events = append(out.Events, &wire.Event{ID: formatID(e.ID), Topic: e.Topic, Key: e.Key, Type: e.Type,
			PartitionKey: e.PartitionKey, Payload: e.Payload, Metadata: e.Metadata, CreatedAt: e.CreatedAt,
			Deliveries: e.Deliveries})
	}
	if more {
		out.NextCursor = formatID(evs[len(evs)-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// replayEvents delivers the selected events of the log again.
func (s *Server) replayEvents(w http.ResponseWriter, r *http.Request) error {
	topic, err := pathTopic(r)
	if err != nil {
		return err
	}
	var req wire.EventReplayRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	f := &idem.EventFilter{Tenant: tenantOf(r), Topic: topic, PartitionKey: req.PartitionKey, Types: req.Types}
	if len(req.Metadata) > 1 {
		return invalid("metadata", "at most one key")
	}
	for k, v := range req.Metadata {
		f.MetaKey, f.MetaValue = k, v
	}
	if f.From, err = parseTime("from", req.From); err != nil {
		return err
	}
	if f.To, err = parseTime("to", req.To); err != nil {
		return err
	}
	if req.Subscription != "" {
		if _, err := s.client.SubscriptionGet(r.Context(), f.Tenant, topic, req.Subscription); err != nil {
			return err
		}
	}
	// The request's key names the replay's deliveries
	// (idem.Client.EventReplayKeyed): a retry after a failure part-way (a
	// 5xx, not stored by the middleware) delivers no event twice.
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	res, err := s.client.EventReplayKeyed(r.Context(), f, req.Subscription, key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.EventReplayReply{Events: res.Events, Deliveries: res.Deliveries})
	return nil
}

// renderSubscription converts a subscription, without secrets.
func renderSubscription(sub *idem.Subscription) *wire.Subscription {
	kinds := sub.EventTypes
	if kinds == nil {
		kinds = []string{}
	}
	out := &wire.Subscription{Topic: sub.Topic, Name: sub.Name, URL: redact.URL(sub.URL), Kinds: kinds,
		EventTypes: sub.EventTypes, MaxAttempts: sub.MaxAttempts, SecretCount: sub.SecretCount,
		CreatedAt: sub.CreatedAt, UpdatedAt: sub.UpdatedAt}
	if sub.Timeout > 0 {
		out.Timeout = sub.Timeout.String()
	}
	return out
}
