package idem_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idem-dev/idem"
)

// TestSubscriptionMaxAttempts: a subscription's MaxAttempts is the
// max_attempts of its delivery jobs (the client's default when 0, which
// SubscriptionGet shows as the number in use), on both stores; a repeated
// publish of a key after the subscription's MaxAttempts changed is the
// same event, not a reused key.
func TestSubscriptionMaxAttempts(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config { return &idem.Config{MaxAttempts: 9, DisableMaintenance: true} }
	bothBundles(t, cfg, testSubscriptionMaxAttempts)
}

func testSubscriptionMaxAttempts(t *testing.T, b *bundle) {
	ctx := context.Background()
	c := b.client
	for _, s := range []*idem.Subscription{
		{Topic: "orders", Name: "two", URL: "http://127.0.0.1:9/two", MaxAttempts: 2},
		{Topic: "orders", Name: "dflt", URL: "http://127.0.0.1:9/dflt"},
	} {
		if _, err := c.SubscriptionPut(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"two": 2, "dflt": 9}
	list, err := c.SubscriptionList(ctx, "", "orders")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	for _, s := range list {
		if s.MaxAttempts != want[s.Name] {
			t.Errorf("%s lists max attempts %d, want %d", s.Name, s.MaxAttempts, want[s.Name])
		}
	}
	res, err := c.Publish(ctx, &idem.Event{Topic: "orders", Key: "e1", Payload: json.RawMessage(`{}`)})
	if err != nil || res.Deliveries != 2 {
		t.Fatalf("publish: %+v %v", res, err)
	}
	jobs, _, err := c.JobList(ctx, &idem.JobListParams{Limit: 10})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("%d delivery jobs (%v), want 2", len(jobs), err)
	}
	for _, j := range jobs {
		var meta struct{ Subscription string }
		_ = json.Unmarshal(j.Metadata, &meta)
		if j.MaxAttempts != want[meta.Subscription] {
			t.Errorf("delivery job of %q: max attempts %d, want %d", meta.Subscription, j.MaxAttempts, want[meta.Subscription])
		}
	}

	// The subscription changes; the event's key is published again (a
	// retried publish): its deliveries exist, so it is the same event.
	if _, err := c.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "two", URL: "http://127.0.0.1:9/two",
		MaxAttempts: 3, KeepSecrets: true}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.SubscriptionGet(ctx, "", "orders", "two"); err != nil || s.MaxAttempts != 3 {
		t.Fatalf("after the change: %+v %v, want max attempts 3", s, err)
	}
	res, err = c.Publish(ctx, &idem.Event{Topic: "orders", Key: "e1", Payload: json.RawMessage(`{}`)})
	if err != nil || !res.Existing {
		t.Fatalf("republish after the change: %+v %v, want the existing event", res, err)
	}
	if jobs, _, err := c.JobList(ctx, &idem.JobListParams{Limit: 10}); err != nil || len(jobs) != 2 {
		t.Fatalf("%d delivery jobs after the republish (%v), want 2", len(jobs), err)
	}
}
