package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestRepublishKeepsSubscriptionOfAFastNode: a subscription created on a
// node whose clock runs a minute ahead, before an event is published on a
// node with the right clock, existed when the event was first published;
// when that publish fails after storing the event (the database refuses its
// delivery jobs), its repeat completes the fan-out to that subscription.
// Before the fix the repeat compared the subscription's creation time (by
// the fast clock, after the event's) with the event's and skipped it: the
// subscription never got the event.
func TestRepublishKeepsSubscriptionOfAFastNode(t *testing.T) {
	t.Parallel()
	for _, fs := range failingStores(`NEW.kind LIKE 'topic:%'`) {
		t.Run(fs.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, heal := fs.open(t)
			fast, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(),
				Now: func() time.Time { return time.Now().Add(time.Minute) }})
			if err != nil {
				t.Fatal(err)
			}
			right, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fast.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:9/hook"}); err != nil {
				t.Fatal(err)
			}
			ev := &idem.Event{Topic: "orders", Key: "order-1", Payload: json.RawMessage(`{}`)}
			if res, err := right.Publish(ctx, ev); err == nil {
				t.Fatalf("publish through the failing database: %+v and no error", res)
			}
			heal()
			res, err := right.Publish(ctx, ev)
			if err != nil || !res.Existing {
				t.Fatalf("repeat: %+v %v", res, err)
			}
			jobs, _, err := right.JobList(ctx, &idem.JobListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[0].Kind != "topic:orders/billing" || res.Deliveries != 1 {
				t.Fatalf("the repeat made %d delivery jobs (Deliveries %d); want the one of orders/billing", len(jobs), res.Deliveries)
			}
		})
	}
}

// TestPublishTimeNotMovedByABrokenClock: a subscription created on a node
// whose clock runs two hours ahead — more than the hour of skew Publish
// allows for — does not move the time of the events published to it.
func TestPublishTimeNotMovedByABrokenClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	broken, err := idem.NewClient(b.store, &idem.Config{Logger: quietLogger(),
		Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:9/hook"}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "order-1", Payload: json.RawMessage(`{}`)})
	if err != nil || res.Deliveries != 1 {
		t.Fatalf("publish: %+v %v", res, err)
	}
	if got := res.Event.CreatedAt; got.After(time.Now()) || got.Before(before.Add(-time.Second)) {
		t.Fatalf("event created at %v, want the publishing node's time (about %v)", got, before)
	}
}
