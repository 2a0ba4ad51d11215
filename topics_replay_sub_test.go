package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
)

// testReplayUnknownSubscription: a replay to one subscription that the topic
// does not have (a typo, one deleted, one of another topic) is ErrNotFound
// and makes no delivery, instead of answering that it replayed the events
// with no delivery at all; on both stores.
func testReplayUnknownSubscription(t *testing.T, b *bundle) {
	ctx := context.Background()
	for _, s := range []*idem.Subscription{
		{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:1/hooks"},
		{Topic: "invoices", Name: "audit", URL: "http://127.0.0.1:1/hooks"},
		{Topic: "orders", Name: "gone", URL: "http://127.0.0.1:1/hooks"},
	} {
		if _, err := b.client.SubscriptionPut(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Type: "paid", Payload: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.client.SubscriptionDelete(ctx, "", "orders", "gone"); err != nil {
		t.Fatal(err)
	}
	before := countJobs(t, b)
	for _, sub := range []string{"biling", "audit", "gone"} {
		res, err := b.client.EventReplayKeyed(ctx, &idem.EventFilter{Topic: "orders"}, sub, "")
		if !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("replay to %q: %+v, %v; want ErrNotFound", sub, res, err)
		}
	}
	if got := countJobs(t, b); got != before {
		t.Fatalf("%d jobs after the refused replays, want %d", got, before)
	}
	res, err := b.client.EventReplay(ctx, &idem.EventFilter{Topic: "orders"}, "billing")
	if err != nil || res.Events != 1 || res.Deliveries != 1 {
		t.Fatalf("replay to billing: %+v %v, want 1 event, 1 delivery", res, err)
	}
}

// countJobs is the number of jobs of the bundle's default tenant.
func countJobs(t *testing.T, b *bundle) int {
	t.Helper()
	jobs, _, err := b.client.JobList(context.Background(), &idem.JobListParams{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

func TestReplayUnknownSubscription(t *testing.T) {
	t.Parallel()
	bothBundles(t, topicConfig, testReplayUnknownSubscription)
}
