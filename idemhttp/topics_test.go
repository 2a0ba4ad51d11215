package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/webhook"
)

// TestTopicsAPI: subscriptions, publish with key dedup, the event log and
// replay over real HTTP, every exchange checked against the document.
func TestTopicsAPI(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testTopicsAPI(t, open)
		})
	}
}

func testTopicsAPI(t *testing.T, open opener) {
	var mu sync.Mutex
	var secret []webhook.Secret
	got := map[string]int{} // webhook-id → pushes
	done := make(chan struct{}, 100)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if webhook.Verify(secret, r.Header, body, time.Now(), 0) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		got[r.Header.Get("webhook-id")]++
		done <- struct{}{}
	}))
	t.Cleanup(rcv.Close)
	e := setup(t, open, &setupOpts{start: true, clientCfg: &idem.Config{DisableMaintenance: true, PollInterval: 20 * time.Millisecond,
		Queues: map[string]idem.QueueConfig{idem.DefaultTopicQueue: {Deliver: true}}}})
	wait := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("delivery did not arrive")
			}
		}
	}

	// API.md: the PUT answers 200 whether it creates or replaces.
	r := e.req("PUT", "/v1/topics/orders/subscriptions/billing", e.keyA, map[string]any{"url": rcv.URL, "event_types": []string{"paid"}})
	expect(t, r, 200, "")
	sec, err := webhook.ParseSecret(r.json(t)["secret"].(string))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	secret = []webhook.Secret{sec}
	mu.Unlock()
	// The same PUT again keeps the secret (the deliveries below verify
	// with the first one) and does not show it.
	r = e.req("PUT", "/v1/topics/orders/subscriptions/billing", e.keyA, map[string]any{"url": rcv.URL, "event_types": []string{"paid"}})
	expect(t, r, 200, "")
	if m := r.json(t); m["secret"] != nil || m["secret_count"] != float64(1) {
		t.Fatalf("repeated put reply %s", r.body)
	}
	// '/' (escaped in the path) in a topic or subscription name: 400, as
	// "a" + "b/c" and "a/b" + "c" would be one stored target; NUL in an
	// event: 400 (PostgreSQL's text cannot hold it).
	expect(t, e.req("PUT", "/v1/topics/orders/subscriptions/bill%2Fing", e.keyA, map[string]any{"url": rcv.URL}), 400, "/problems/invalid-request")
	expect(t, e.req("PUT", "/v1/topics/ord%2Fers/subscriptions/billing", e.keyA, map[string]any{"url": rcv.URL}), 400, "/problems/invalid-request")
	expect(t, e.req("POST", "/v1/topics/orders/events", e.keyA, map[string]any{"payload": map[string]any{},
		"metadata": map[string]any{"region": "eu\x00"}}), 400, "/problems/invalid-request")
	r = e.req("GET", "/v1/topics/orders/subscriptions", e.keyA, nil)
	expect(t, r, 200, "")
	if subs := r.json(t)["subscriptions"].([]any); len(subs) != 1 || subs[0].(map[string]any)["secret"] != nil {
		t.Fatalf("list: %s", r.body)
	}
	expect(t, e.req("GET", "/v1/topics/orders/subscriptions/billing", e.keyB, nil), 404, "/problems/not-found")
	expect(t, e.req("GET", "/v1/targets", e.keyA, nil), 200, "") // subscriptions are not listed as targets

	pub := map[string]any{"key": "o1-paid", "type": "paid", "partition_key": "o1", "payload": map[string]any{"amount": 5}, "metadata": map[string]any{"region": "eu"}}
	r = e.req("POST", "/v1/topics/orders/events", e.keyA, pub)
	expect(t, r, 201, "")
	if m := r.json(t); m["deliveries"] != float64(1) || m["existing"] != false {
		t.Fatalf("publish: %s", r.body)
	}
	wait(1)
	r = e.req("POST", "/v1/topics/orders/events", e.keyA, pub)
	expect(t, r, 200, "")
	if r.header.Get("Idempotent-Replayed") != "true" || r.json(t)["existing"] != true {
		t.Fatalf("repeat: %s", r.body)
	}
	r = e.req("POST", "/v1/topics/orders/events", e.keyA, map[string]any{"type": "created", "partition_key": "o2", "payload": 1})
	expect(t, r, 201, "")
	if r.json(t)["deliveries"] != float64(0) {
		t.Fatalf("filtered type delivered: %s", r.body)
	}
	r = e.req("GET", "/v1/topics/orders/events?limit=1", e.keyA, nil)
	expect(t, r, 200, "")
	cursor, _ := r.json(t)["next_cursor"].(string)
	r = e.req("GET", "/v1/topics/orders/events?limit=5&cursor="+cursor, e.keyA, nil)
	expect(t, r, 200, "")
	if evs := r.json(t)["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["type"] != "created" || evs[0].(map[string]any)["deliveries"] != float64(0) {
		t.Fatalf("page 2: %s", r.body)
	}

	r = e.req("POST", "/v1/topics/orders/replay", e.keyA, map[string]any{"metadata": map[string]string{"region": "eu"}, "subscription": "billing"})
	expect(t, r, 200, "")
	if m := r.json(t); m["events"] != float64(1) || m["deliveries"] != float64(1) {
		t.Fatalf("replay: %s", r.body)
	}
	wait(1)
	mu.Lock()
	// Tenant a is not the default tenant: its ids are "a <key>".
	if len(got) != 2 || got["a event-1/billing"] != 1 {
		t.Errorf("receiver saw %v, want the original (a event-1/billing) and one replay", got)
	}
	mu.Unlock()

	for field, body := range map[string]any{
		"payload":       map[string]any{"type": "x"},
		"metadata":      map[string]any{"payload": 1, "metadata": []int{1}},
		"partition_key": map[string]any{"payload": 1, "partition_key": "has\ttab"},
	} {
		r = e.req("POST", "/v1/topics/orders/events", e.keyA, body)
		if r.status != 400 {
			t.Errorf("%s: status %d %s", field, r.status, r.body)
		}
	}
	expect(t, e.req("POST", "/v1/topics/orders/replay", e.keyA, map[string]any{"subscription": "nope"}), 404, "/problems/not-found")
	expect(t, e.req("DELETE", "/v1/topics/orders/subscriptions/billing", e.keyA, nil), 204, "")
}

// TestPublishTakesTheHeaderKey: the Idempotency-Key header is the event's
// key when the body has none (a retry with it publishes once); the same
// key in both is that key (a different one: TestPublishKeyDisagreement).
func TestPublishTakesTheHeaderKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	path := "/v1/topics/orders/events"
	body := map[string]any{"type": "paid", "payload": map[string]any{"n": 1}}
	r := e.req("POST", path, e.keyA, body, "Idempotency-Key", "pub-1")
	expect(t, r, 201, "")
	first := r.json(t)["event_id"]
	r = e.req("POST", path, e.keyA, body, "Idempotency-Key", "pub-1")
	expect(t, r, 200, "")
	if m := r.json(t); m["event_id"] != first || m["existing"] != true || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat of the header key: %s %v", r.body, r.header)
	}
	// The header key and the body key are one key.
	r = e.req("POST", path, e.keyA, map[string]any{"key": "pub-1", "type": "paid", "payload": map[string]any{"n": 1}})
	expect(t, r, 200, "")
	if r.json(t)["event_id"] != first {
		t.Fatalf("body key after header key: %s", r.body)
	}
	r = e.req("POST", path, e.keyA, map[string]any{"key": "pub-1", "type": "paid", "payload": map[string]any{"n": 1}}, "Idempotency-Key", "pub-1")
	expect(t, r, 200, "")
	r = e.req("GET", path, e.keyA, nil)
	expect(t, r, 200, "")
	if evs := r.json(t)["events"].([]any); len(evs) != 1 {
		t.Fatalf("%d events, want 1: %s", len(evs), r.body)
	}
}

// TestPublishKeyReused (both stores): a repeat of an event key with the
// same event (another key order and spacing) is 200 existing:true; with a
// different payload, header key or body key, it is 422
// /problems/idempotency-key-reused, as a job key reused with another
// request is, and the event log still holds the one event.
func TestPublishKeyReused(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open, nil)
			path := "/v1/topics/orders/events"
			r := e.req("POST", path, e.keyA, `{"key":"o1","type":"paid","payload":{"amount":5,"currency":"EUR"}}`)
			expect(t, r, 201, "")
			first := r.json(t)["event_id"]
			r = e.req("POST", path, e.keyA, `{"payload":{ "currency":"EUR", "amount":5 },"type":"paid","key":"o1"}`)
			expect(t, r, 200, "")
			if m := r.json(t); m["event_id"] != first || m["existing"] != true {
				t.Fatalf("repeat of the same event: %s", r.body)
			}
			expect(t, e.req("POST", path, e.keyA, `{"key":"o1","type":"paid","payload":{"amount":6,"currency":"EUR"}}`),
				422, "/problems/idempotency-key-reused")
			expect(t, e.req("POST", path, e.keyA, `{"type":"paid","payload":{"amount":6}}`, "Idempotency-Key", "o1"),
				422, "/problems/idempotency-key-reused")
			r = e.req("GET", path, e.keyA, nil)
			expect(t, r, 200, "")
			if evs := r.json(t)["events"].([]any); len(evs) != 1 {
				t.Fatalf("%d events, want 1: %s", len(evs), r.body)
			}
		})
	}
}

// TestPublishKeyDisagreement (both stores): an Idempotency-Key header and a
// different body key are a 400 naming key, with the words and problem type
// of POST /v1/jobs, and publish nothing (the body's key used to win
// silently); a body key that is no key is refused as such, not as
// differing from the header the TypeScript and PHP clients then make up.
func TestPublishKeyDisagreement(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open opener) {
		e := setup(t, open, nil)
		path := "/v1/topics/orders/events"
		body := map[string]any{"key": "pub-1", "type": "paid", "payload": map[string]any{"n": 1}}
		r := e.req("POST", path, e.keyA, body, "Idempotency-Key", "random-1")
		expect(t, r, 400, "/problems/invalid-request")
		jobs := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "idempotency_key": "pub-1"}, "Idempotency-Key", "random-1")
		expect(t, jobs, 400, "/problems/invalid-request")
		if got, want := r.json(t)["detail"], jobs.json(t)["detail"].(string); got != strings.Replace(want, "idempotency_key", "key", 1) {
			t.Fatalf("publish detail %q, jobs detail %q", got, want)
		}
		if errs, _ := r.json(t)["errors"].(map[string]any); errs["key"] != "differs from the Idempotency-Key header" {
			t.Fatalf("errors: %s", r.body)
		}
		r = e.req("POST", path, e.keyA, map[string]any{"key": "pub-\u00e9", "payload": 1}, "Idempotency-Key", "random-2")
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs["key"] != "must be printable ASCII (0x20-0x7E)" {
			t.Fatalf("non-ASCII body key: %s", r.body)
		}
		r = e.req("GET", path, e.keyA, nil)
		expect(t, r, 200, "")
		if evs := r.json(t)["events"].([]any); len(evs) != 0 {
			t.Fatalf("%d events, want none: %s", len(evs), r.body)
		}
	})
}
