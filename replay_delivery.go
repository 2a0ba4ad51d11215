package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/store"
)

// deliveryCheck tells the delivery jobs a job replay may copy: a job whose
// kind starts with TopicKindPrefix is pushed to the subscription its kind
// names, signed with its secrets, so JobReplay copies one only when it is
// what a replay of the event to that subscription (EventReplay) would send:
// its args are the delivery of an event of the log of its tenant and topic
// (event id, topic, type, key, partition key, payload, metadata, time), and
// the topic has that subscription, which takes the event's type. Anything
// else of that kind — a job a client enqueued under it before the prefix
// was refused, the delivery of an event the log no longer holds — is
// skipped (counted in JobReplayResult.Skipped).
type deliveryCheck struct {
	c    *Client
	subs map[string][]*store.DeliveryTarget // by tenant and topic
}

// genuine reports whether job o may be copied: always when its kind is
// not reserved, else when it is a delivery the topic replay would make.
func (d *deliveryCheck) genuine(ctx context.Context, o *JobRow) (bool, error) {
	rest, ok := strings.CutPrefix(o.Kind, TopicKindPrefix)
	if !ok {
		return true, nil
	}
	topic, sub, ok := strings.Cut(rest, "/")
	if !ok || ValidateName("topic", topic) != nil || ValidateName("subscription", sub) != nil {
		return false, nil
	}
	var env EventEnvelope
	if err := json.Unmarshal(o.Args, &env); err != nil || env.Topic != topic {
		return false, nil
	}
	id, err := strconv.ParseInt(env.EventID, 10, 64)
	if err != nil || id <= 0 {
		return false, nil
	}
	evs, err := d.c.store.EventList(ctx, &store.EventListParams{Tenant: o.Tenant, Topic: topic, AfterID: id - 1, Limit: 1})
	if err != nil {
		return false, fmt.Errorf("replay: read event %d of job %d: %w", id, o.ID, err)
	}
	if len(evs) == 0 || evs[0].ID != id {
		return false, nil // not in the log (never, or deleted by retention)
	}
	ev := evs[0]
	want, err := eventArgs(ev, env.ReplayOf != "")
	if err != nil || !sameDelivery(o.Args, want) {
		return false, nil
	}
	subs, err := d.subscriptions(ctx, o.Tenant, topic)
	if err != nil {
		return false, err
	}
	for _, s := range subs {
		if s.Name == topic+"/"+sub {
			return typeMatches(s.EventTypes, ev.Type), nil
		}
	}
	return false, nil
}

// subscriptions reads the subscriptions of topic once per replay.
func (d *deliveryCheck) subscriptions(ctx context.Context, tenant, topic string) ([]*store.DeliveryTarget, error) {
	k := tenant + "\x00" + topic
	if subs, ok := d.subs[k]; ok {
		return subs, nil
	}
	subs, err := d.c.subscriptions(ctx, tenant, topic)
	if err != nil {
		return nil, fmt.Errorf("replay: read the subscriptions of topic %s: %w", topic, err)
	}
	if d.subs == nil {
		d.subs = map[string][]*store.DeliveryTarget{}
	}
	d.subs[k] = subs
	return subs, nil
}

// sameDelivery reports whether args, a delivery job's, are the envelope
// want: the same fields, each the same JSON value, created_at the same
// instant (written with another zone or precision, it is still the
// event's time).
func sameDelivery(args, want json.RawMessage) bool {
	var a, w map[string]json.RawMessage
	if json.Unmarshal(args, &a) != nil || json.Unmarshal(want, &w) != nil || len(a) != len(w) {
		return false
	}
	for k, wv := range w {
		av, ok := a[k]
		if !ok {
			return false
		}
		if k == "created_at" {
			var at, wt time.Time
			if json.Unmarshal(av, &at) != nil || json.Unmarshal(wv, &wt) != nil || !at.Equal(wt) {
				return false
			}
			continue
		}
		if !store.SameResult(av, wv) {
			return false
		}
	}
	return true
}
