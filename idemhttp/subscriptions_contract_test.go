package idemhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestSubscriptionContract: PUT /v1/topics/{topic}/subscriptions/{name}
// takes API.md's {url, secret?, kinds?, max_attempts?}: kinds filters the
// events (event_types, its former name, still works; both with other
// types: 400), max_attempts bounds the attempts of each delivery (a
// receiver answering 500 makes the delivery dead after 2 attempts), and
// the replies show both.
func TestSubscriptionContract(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) { t.Parallel(); testSubscriptionContract(t, open) })
	}
}

func testSubscriptionContract(t *testing.T, open opener) {
	var mu sync.Mutex
	pushes := map[string]int{} // path → requests
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pushes[r.URL.Path]++
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(rcv.Close)
	e := setup(t, open, &setupOpts{start: true, clientCfg: &idem.Config{DisableMaintenance: true, PollInterval: 20 * time.Millisecond,
		MaxAttempts:  6,
		RetryByQueue: map[string]idem.RetryPolicy{idem.DefaultTopicQueue: {Delays: []time.Duration{10 * time.Millisecond}, Jitter: -1}},
		Queues:       map[string]idem.QueueConfig{idem.DefaultTopicQueue: {Deliver: true}}}})
	path := "/v1/topics/orders/subscriptions/"

	// Refusals: out-of-range max_attempts (an explicit 0 too), kinds and
	// event_types that differ, a kind that is not a name.
	for _, body := range []map[string]any{
		{"url": rcv.URL, "max_attempts": 0},
		{"url": rcv.URL, "max_attempts": -1},
		{"url": rcv.URL, "max_attempts": 1001},
		{"url": rcv.URL, "kinds": []string{"paid"}, "event_types": []string{"shipped"}},
		{"url": rcv.URL, "kinds": []string{"has space"}},
	} {
		r := e.req("PUT", path+"billing", e.keyA, body)
		if r.status != 400 {
			t.Errorf("%v: status %d %s, want 400", body, r.status, r.body)
		}
	}
	if r := e.req("GET", path+"billing", e.keyA, nil); r.status != 404 {
		t.Fatalf("a refused PUT stored the subscription: %d %s", r.status, r.body)
	}

	check := func(r *resp, kinds []string, attempts int) {
		t.Helper()
		var got struct {
			Kinds       []string `json:"kinds"`
			MaxAttempts int      `json:"max_attempts"`
		}
		if err := json.Unmarshal(r.body, &got); err != nil || !slices.Equal(got.Kinds, kinds) || got.MaxAttempts != attempts {
			t.Fatalf("reply %s: want kinds %q and max_attempts %d", r.body, kinds, attempts)
		}
	}
	// API.md: 200 whether the PUT creates or replaces.
	r := e.req("PUT", path+"billing", e.keyA, map[string]any{"url": rcv.URL + "/billing", "kinds": []string{"paid"}, "max_attempts": 2})
	expect(t, r, 200, "")
	check(r, []string{"paid"}, 2)
	r = e.req("PUT", path+"billing", e.keyA, map[string]any{"url": rcv.URL + "/billing", "kinds": []string{"paid"},
		"event_types": []string{"paid"}, "max_attempts": 2})
	expect(t, r, 200, "")
	check(r, []string{"paid"}, 2)
	r = e.req("PUT", path+"legacy", e.keyA, map[string]any{"url": rcv.URL + "/legacy", "event_types": []string{"shipped"}})
	expect(t, r, 200, "")
	check(r, []string{"shipped"}, 6) // the server's default
	r = e.req("GET", path+"billing", e.keyA, nil)
	expect(t, r, 200, "")
	check(r, []string{"paid"}, 2)
	r = e.req("GET", "/v1/topics/orders/subscriptions", e.keyA, nil)
	expect(t, r, 200, "")
	var list struct {
		Subscriptions []json.RawMessage `json:"subscriptions"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Subscriptions) != 2 {
		t.Fatalf("list %s", r.body)
	}
	check(&resp{body: list.Subscriptions[0]}, []string{"paid"}, 2)
	check(&resp{body: list.Subscriptions[1]}, []string{"shipped"}, 6)

	// kinds filters: a "created" event goes nowhere, a "paid" one to
	// billing only, where it is dead after its 2 attempts.
	r = e.req("POST", "/v1/topics/orders/events", e.keyA, map[string]any{"type": "created", "payload": 1})
	expect(t, r, 201, "")
	if d := r.json(t)["deliveries"]; d != float64(0) {
		t.Fatalf("an event of no subscribed kind: %s", r.body)
	}
	r = e.req("POST", "/v1/topics/orders/events", e.keyA, map[string]any{"type": "paid", "payload": 1})
	expect(t, r, 201, "")
	if d := r.json(t)["deliveries"]; d != float64(1) {
		t.Fatalf("a paid event: %s", r.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, _, err := e.client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Tenant: "a"}, Limit: 10})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("%d delivery jobs (%v), want 1", len(jobs), err)
	}
	job, err := e.client.JobWait(ctx, jobs[0].ID)
	if err != nil || job.State != idem.StateDead || job.Attempt != 2 || job.MaxAttempts != 2 {
		t.Fatalf("delivery job: %+v %v; want dead after 2 attempts", job, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if pushes["/billing"] != 2 || pushes["/legacy"] != 0 {
		t.Fatalf("pushes %v, want 2 to /billing and none to /legacy", pushes)
	}
}
