package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/deliver"
	"github.com/idem-dev/idem/store"
)

// subscriber is a real endpoint that deduplicates by webhook-id and
// records the events it accepted, in arrival order.
type subscriber struct {
	srv  *httptest.Server
	down atomic.Bool // answer 503 while set

	mu       sync.Mutex
	seen     map[string]bool
	events   []idem.EventEnvelope
	requests int
	changed  chan struct{}
}

func newSubscriber(t *testing.T) *subscriber {
	t.Helper()
	s := &subscriber{seen: map[string]bool{}, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests++
		if s.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		id := r.Header.Get("webhook-id")
		if !s.seen[id] {
			var p deliver.Payload
			var env idem.EventEnvelope
			if json.Unmarshal(body, &p) != nil || json.Unmarshal(p.Args, &env) != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			s.seen[id] = true
			s.events = append(s.events, env)
			close(s.changed)
			s.changed = make(chan struct{})
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// wait returns the accepted events once there are n.
func (s *subscriber) wait(t *testing.T, n int) []idem.EventEnvelope {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		s.mu.Lock()
		if len(s.events) >= n {
			out := append([]idem.EventEnvelope(nil), s.events...)
			s.mu.Unlock()
			return out
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("subscriber got %d events, want %d", len(s.events), n)
		}
	}
}

func (s *subscriber) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// topicConfig delivers the topics queue with fast retries and many attempts.
func topicConfig() *idem.Config {
	return &idem.Config{
		Queues:       map[string]idem.QueueConfig{idem.DefaultTopicQueue: {MaxWorkers: 10, Deliver: true}},
		RetryByQueue: map[string]idem.RetryPolicy{idem.DefaultTopicQueue: {Delays: []time.Duration{20 * time.Millisecond}, Jitter: -1}},
		MaxAttempts:  1000,
		PollInterval: 20 * time.Millisecond,
	}
}

// checkOrder fails unless each entity's events arrived in publish order.
func checkOrder(t *testing.T, who string, evs []idem.EventEnvelope) {
	t.Helper()
	last := map[string]int{}
	for _, e := range evs {
		var p struct{ Seq int }
		_ = json.Unmarshal(e.Payload, &p)
		if p.Seq <= last[e.PartitionKey] {
			t.Errorf("%s: %s event %d after %d", who, e.PartitionKey, p.Seq, last[e.PartitionKey])
		}
		last[e.PartitionKey] = p.Seq
	}
}

// testTopicFanOut: three subscriptions, one down for a while: the other two
// get every event meanwhile, in order per entity; the third catches up in
// order once it is back; a republished key adds nothing.
func testTopicFanOut(t *testing.T, b *bundle) {
	ctx := context.Background()
	subs := map[string]*subscriber{"a": newSubscriber(t), "b": newSubscriber(t), "c": newSubscriber(t)}
	subs["c"].down.Store(true)
	for name, s := range subs {
		if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: name, URL: s.srv.URL}); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t)
	const n = 12
	for i := 1; i <= n; i++ {
		res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: fmt.Sprintf("e%d", i), Type: "order.updated",
			PartitionKey: fmt.Sprintf("order-%d", i%3), Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))})
		if err != nil || res.Deliveries != 3 || res.Existing {
			t.Fatalf("publish %d: %+v %v", i, res, err)
		}
	}
	checkOrder(t, "a", subs["a"].wait(t, n))
	checkOrder(t, "b", subs["b"].wait(t, n))
	if got := subs["c"].count(); got != 0 {
		t.Fatalf("c accepted %d events while down", got)
	}
	subs["c"].mu.Lock()
	refused := subs["c"].requests
	subs["c"].mu.Unlock()
	if refused == 0 {
		t.Fatal("c was never tried while down")
	}
	subs["c"].down.Store(false)
	checkOrder(t, "c", subs["c"].wait(t, n))

	if res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "e1", Type: "order.updated", PartitionKey: "order-1",
		Payload: json.RawMessage(`{"seq":99}`)}); !errors.Is(err, idem.ErrKeyReused) {
		t.Fatalf("republish with another payload: %+v %v, want ErrKeyReused", res, err)
	}
	res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "e1", Type: "order.updated", PartitionKey: "order-1",
		Payload: json.RawMessage(`{"seq":1}`)})
	if err != nil || !res.Existing || res.Event.Type != "order.updated" {
		t.Fatalf("republish: %+v %v", res, err)
	}
	jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Limit: 500})
	if err != nil || len(jobs) != 3*n {
		t.Fatalf("%d delivery jobs (%v), want %d", len(jobs), err, 3*n)
	}
}

func TestTopicFanOut(t *testing.T) {
	t.Parallel()
	bothBundles(t, topicConfig, testTopicFanOut)
}

// TestTopicReplay: replays by entity, by types to one subscription, by a
// metadata value and by time range are new deliveries that name the
// original event.
func TestTopicReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, topicConfig())
	main, audit := newSubscriber(t), newSubscriber(t)
	for name, s := range map[string]*subscriber{"main": main, "audit": audit} {
		if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: name, URL: s.srv.URL}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "paid-only", URL: audit.srv.URL + "/paid",
		EventTypes: []string{"paid"}}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	type ev struct{ entity, typ, region string }
	var published []*idem.Event
	for i, e := range []ev{{"x", "created", "eu"}, {"y", "created", "us"}, {"x", "paid", "eu"}, {"y", "paid", "us"}, {"x", "shipped", "us"}} {
		res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Type: e.typ, PartitionKey: e.entity,
			Metadata: json.RawMessage(`{"region":"` + e.region + `"}`), Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i+1))})
		if err != nil {
			t.Fatal(err)
		}
		published = append(published, res.Event)
	}
	main.wait(t, 5)
	audit.wait(t, 7) // 5 via audit, 2 via paid-only

	replay := func(f idem.EventFilter, sub string, wantEvents, wantDeliveries int) {
		t.Helper()
		f.Topic = "orders"
		res, err := b.client.EventReplay(ctx, &f, sub)
		if err != nil || res.Events != wantEvents || res.Deliveries != wantDeliveries {
			t.Fatalf("replay %+v to %q: %+v %v, want %d events %d deliveries", f, sub, res, err, wantEvents, wantDeliveries)
		}
	}
	replay(idem.EventFilter{PartitionKey: "x"}, "main", 3, 3)
	got := main.wait(t, 8)[5:]
	for i, e := range got {
		if e.PartitionKey != "x" || e.ReplayOf == "" || e.ReplayOf != e.EventID {
			t.Errorf("replayed %d: %+v", i, e)
		}
	}
	checkOrder(t, "main replay", got)
	replay(idem.EventFilter{Types: []string{"paid"}}, "", 2, 6) // main, audit, paid-only
	replay(idem.EventFilter{MetaKey: "region", MetaValue: "eu"}, "main", 2, 2)
	replay(idem.EventFilter{From: published[3].CreatedAt, To: published[4].CreatedAt.Add(time.Microsecond)}, "main", 2, 2)
	main.wait(t, 8+2+2+2)
	audit.wait(t, 7+4)

	list, err := b.client.EventList(ctx, &idem.EventFilter{Topic: "orders", Types: []string{"created"}}, 0, 10)
	if err != nil || len(list) != 2 || list[0].ID != published[0].ID || list[0].Deliveries != 2 {
		t.Fatalf("event list: %v %v", list, err)
	}
	_, err = b.client.EventReplay(ctx, &idem.EventFilter{}, "")
	if err == nil {
		t.Fatal("replay without a topic: no error")
	}
}

// TestEventMetaFilterMatchesStringsOnly: the metadata filter is "the
// metadata's top-level MetaKey is the string MetaValue": a number or
// boolean of the same text does not match, on either store.
func TestEventMetaFilterMatchesStringsOnly(t *testing.T) {
	t.Parallel()
	test := func(t *testing.T, c *idem.Client) {
		ctx := context.Background()
		for _, meta := range []string{`{"shard":5,"flag":true}`, `{"shard":"5","flag":"true"}`} {
			if _, err := c.Publish(ctx, &idem.Event{Topic: "orders", Payload: json.RawMessage(`{}`),
				Metadata: json.RawMessage(meta)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []idem.EventFilter{
			{Topic: "orders", MetaKey: "shard", MetaValue: "5"},
			{Topic: "orders", MetaKey: "flag", MetaValue: "true"},
		} {
			list, err := c.EventList(ctx, &f, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || string(list[0].Metadata) != `{"shard":"5","flag":"true"}` {
				t.Errorf("filter %s=%q: %d events, want the one with string values", f.MetaKey, f.MetaValue, len(list))
			}
		}
	}
	bothStores(t, func() *idem.Config { return nil }, test)
}

// TestPublishRefusesNUL: metadata or a payload holding "\u0000" is valid
// JSON but PostgreSQL's text cannot hold it (a metadata filter over the
// topic failed with SQLSTATE 22P05): Publish refuses it on both stores, and
// filtered lists keep working.
func TestPublishRefusesNUL(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]func(t *testing.T) *idem.Client{
		"sqlite":   func(t *testing.T) *idem.Client { return setup(t, nil).client },
		"postgres": func(t *testing.T) *idem.Client { b, _, _ := pgSetup(t, nil); return b.client },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			client := c(t)
			for field, ev := range map[string]*idem.Event{
				"metadata": {Topic: "orders", Payload: json.RawMessage(`{}`), Metadata: json.RawMessage(`{"region":"eu\u0000"}`)},
				"payload":  {Topic: "orders", Payload: json.RawMessage(`{"s":"\u0000"}`)},
			} {
				var inv *idem.InvalidError
				if _, err := client.Publish(ctx, ev); !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &inv) || inv.Field != field {
					t.Errorf("publish with NUL in its %s: %v, want invalid %s", field, err, field)
				}
			}
			if _, err := client.Publish(ctx, &idem.Event{Topic: "orders", Payload: json.RawMessage(`{}`),
				Metadata: json.RawMessage(`{"region":"eu\\u0000"}`)}); err != nil {
				t.Fatalf("an escaped backslash before u0000 is no NUL: %v", err)
			}
			list, err := client.EventList(ctx, &idem.EventFilter{Topic: "orders", MetaKey: "region", MetaValue: `eu\u0000`}, 0, 10)
			if err != nil || len(list) != 1 {
				t.Fatalf("list with a metadata filter: %d events, %v", len(list), err)
			}
		})
	}
}

// TestPublishRefusesSlashInTopic: a topic with '/' could not have
// subscriptions of its own (see TestSubscriptionBoundaries).
func TestPublishRefusesSlashInTopic(t *testing.T) {
	t.Parallel()
	var inv *idem.InvalidError
	_, err := setup(t, nil).client.Publish(context.Background(), &idem.Event{Topic: "a/b", Payload: json.RawMessage(`{}`)})
	if !errors.As(err, &inv) || inv.Field != "topic" {
		t.Fatalf("publish to a/b: %v, want invalid topic", err)
	}
}

// TestRepublishSkipsLaterSubscription: a republished key creates only the
// deliveries it lacks among the subscriptions of its first publish (a
// fan-out cut short by a crash); a subscription created after that publish
// does not get the old event.
func TestRepublishSkipsLaterSubscription(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	s1, s2 := newSubscriber(t), newSubscriber(t)
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "early", URL: s1.srv.URL}); err != nil {
		t.Fatal(err)
	}
	res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "k1", Payload: json.RawMessage(`{}`)})
	if err != nil || res.Deliveries != 1 {
		t.Fatalf("publish: %+v %v", res, err)
	}
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "late", URL: s2.srv.URL}); err != nil {
		t.Fatal(err)
	}
	res, err = b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "k1", Payload: json.RawMessage(`{}`)})
	if err != nil || !res.Existing {
		t.Fatalf("republish: %+v %v", res, err)
	}
	jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || res.Deliveries != 1 || jobs[0].Kind != "topic:orders/early" {
		t.Fatalf("republish made %d delivery jobs (Deliveries %d) for an event published to 1 subscription", len(jobs), res.Deliveries)
	}
}

// TestEventIDNotReusedAfterRetention: once retention has deleted the newest
// event, the next event gets a new id: its delivery key
// "event-<id>/<subscription>" would otherwise be held by the old event's
// delivery job (a failed publish, or a receiver deduplicating on
// webhook-id dropping the new event). SQLite once reused the id.
func TestEventIDNotReusedAfterRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	sub := newSubscriber(t)
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: sub.srv.URL}); err != nil {
		t.Fatal(err)
	}
	first, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Payload: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	// What the retention service does once the event is older than
	// Config.EventRetention.
	if _, err := b.store.EventDeleteBefore(ctx, &store.EventDeleteBeforeParams{Before: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	second, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Payload: json.RawMessage(`{"n":2}`)})
	if err != nil {
		t.Fatalf("second publish after retention: %v", err)
	}
	if second.Event.ID == first.Event.ID || second.Deliveries != 1 {
		t.Fatalf("the second event: id %d (the deleted first one: %d), %d deliveries", second.Event.ID, first.Event.ID, second.Deliveries)
	}
}

// TestPublishLongPartitionKey: an event whose partition key is as long as
// a key may be (255 bytes) is delivered, in order, to a subscription whose
// name makes "subscription/partition key" longer than a job's partition
// key may be; the publish does not fail after storing the event.
func TestPublishLongPartitionKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, topicConfig())
	sub := newSubscriber(t)
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: sub.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	entity := strings.Repeat("e", 255)
	for i := 1; i <= 3; i++ {
		res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: fmt.Sprintf("k%d", i), PartitionKey: entity,
			Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))})
		if err != nil || res.Deliveries != 1 {
			t.Fatalf("publish %d: %+v %v", i, res, err)
		}
	}
	evs := sub.wait(t, 3)
	checkOrder(t, "billing", evs)
	jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Limit: 10})
	if err != nil || len(jobs) != 3 || jobs[0].PartitionKey != jobs[2].PartitionKey || jobs[0].PartitionKey == "" {
		t.Fatalf("delivery jobs %v %v: want 3 in one partition", jobs, err)
	}
}

// TestRepublishAfterWindowsDoesNotDeliverAgain: a key published again after
// the delivery keys' dedup window and result TTL (7 days each by default)
// returns the existing event and creates no delivery: the subscription got
// the event the first time, and no key or cached result is left to stop a
// second push of the same webhook-id.
func TestRepublishAfterWindowsDoesNotDeliverAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b := setup(t, &idem.Config{Now: clock.Now})
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:9/hook"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "order-42:paid", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	jobs, err := b.client.Claim(ctx, idem.ClaimParams{Queues: []string{idem.DefaultTopicQueue}, WorkerID: "w"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if _, err := b.client.Complete(ctx, "", jobs[0].ID, jobs[0].LeaseToken, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	clock.Add(idem.DefaultDedupWindow + idem.DefaultResultTTL + time.Hour)
	res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "order-42:paid", Payload: json.RawMessage(`{}`)})
	if err != nil || !res.Existing {
		t.Fatalf("republish: %+v %v", res, err)
	}
	all, _, err := b.client.JobList(ctx, &idem.JobListParams{Limit: 10})
	if err != nil || len(all) != 1 {
		t.Fatalf("after the republish: %d delivery jobs (%v), want the first one only", len(all), err)
	}
}

// TestFitKeyFormat pins the delivery keys FitKey makes, which are stored
// as job keys: a key up to 255 bytes (counted in bytes, not characters)
// is kept, a longer one becomes "sha256:" and its full hex SHA-256.
func TestFitKeyFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"event-e1/billing", "event-e1/billing"},
		{strings.Repeat("k", 255), strings.Repeat("k", 255)},
		{strings.Repeat("k", 256), "sha256:ce16fe78208a4e93f7158e62393680e025b2ad584f4e875ce903a654bb74cf93"},
		{strings.Repeat("k", 253) + "é", strings.Repeat("k", 253) + "é"}, // 255 bytes
		{strings.Repeat("k", 254) + "é", "sha256:c6e1c86a14c547ce7ca125457681c9162c42ca66fad81335f454524d36918cde"},
	} {
		if got := idem.FitKey(tc.in); got != tc.want {
			t.Errorf("FitKey(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
		}
	}
}

// TestPublishToMoreSubscriptionsThanABatch: a topic with more subscriptions
// than one EnqueueMany takes (MaxBatch) gets one delivery per subscription,
// from a publish and from a replay. The fan-out used to enqueue them in one
// call, refused as a whole ("jobs: batch of 1001 is over 1000") after the
// event was stored: no event of the topic was ever delivered.
func TestPublishToMoreSubscriptionsThanABatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	const n = idem.MaxBatch + 1
	for i := range n {
		if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: fmt.Sprintf("s%04d", i),
			URL: "http://127.0.0.1:9/hook"}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "k1", Payload: json.RawMessage(`{}`)})
	if err != nil || res.Deliveries != n {
		t.Fatalf("publish: %+v %v, want %d deliveries", res, err, n)
	}
	rep, err := b.client.EventReplay(ctx, &idem.EventFilter{Topic: "orders"}, "")
	if err != nil || rep.Events != 1 || rep.Deliveries != n {
		t.Fatalf("replay: %+v %v, want 1 event and %d deliveries", rep, err, n)
	}
	jobs := 0
	lp := &idem.JobListParams{Limit: 500}
	for {
		rows, next, err := b.client.JobList(ctx, lp)
		if err != nil {
			t.Fatal(err)
		}
		jobs += len(rows)
		if next == 0 {
			break
		}
		lp.Cursor = next
	}
	if jobs != 2*n {
		t.Fatalf("%d delivery jobs, want %d (one per subscription, from the publish and from the replay)", jobs, 2*n)
	}
}
