package idemhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/webhook"
)

func TestTargetsAPI(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("deliver end to end", func(t *testing.T) { t.Parallel(); testTargetDelivery(t, open) })
			t.Run("bad input", func(t *testing.T) { t.Parallel(); testTargetBadInput(t, open) })
		})
	}
}

// testTargetDelivery: a target put over the API with a generated secret
// receives the jobs of its queue, signed with that secret, also after the
// PUT is repeated; the secret is shown once; the attempt log names the
// target and status.
func testTargetDelivery(t *testing.T, open opener) {
	var mu sync.Mutex
	var secret []webhook.Secret
	var ids []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := webhook.Verify(secret, r.Header, body, time.Now(), 0); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		ids = append(ids, r.Header.Get("webhook-id"))
		_, _ = io.WriteString(w, `{"received":true}`)
	}))
	t.Cleanup(rcv.Close)
	e := setup(t, open, &setupOpts{start: true, clientCfg: &idem.Config{DisableMaintenance: true,
		Queues: map[string]idem.QueueConfig{"hooks": {Deliver: true}}, PollInterval: 20 * time.Millisecond}})

	r := e.req("PUT", "/v1/targets/orders", e.admin, map[string]any{"url": rcv.URL, "queue": "hooks", "timeout": "5s"})
	expect(t, r, 201, "")
	got := r.json(t)
	sec, err := webhook.ParseSecret(got["secret"].(string))
	if err != nil || got["secret_count"] != float64(1) {
		t.Fatalf("put reply %s: %v", r.body, err)
	}
	mu.Lock()
	secret = []webhook.Secret{sec}
	mu.Unlock()
	// The same PUT again (a retry after a lost reply): 200, the secret is
	// kept (the receiver below verifies with the first one) and not shown.
	r = e.req("PUT", "/v1/targets/orders", e.admin, map[string]any{"url": rcv.URL, "queue": "hooks", "timeout": "5s"})
	expect(t, r, 200, "")
	if m := r.json(t); m["secret"] != nil || m["secret_count"] != float64(1) {
		t.Fatalf("repeated put reply %s", r.body)
	}
	for _, path := range []string{"/v1/targets/orders", "/v1/targets"} {
		r = e.req("GET", path, e.admin, nil)
		expect(t, r, 200, "")
		if _, ok := r.json(t)["secret"]; ok {
			t.Fatalf("GET %s returns the secret: %s", path, r.body)
		}
	}
	id := e.enqueue(e.admin, map[string]any{"kind": "order.shipped", "queue": "hooks", "args": map[string]any{"order": 42}})
	n, _ := strconv.ParseInt(id, 10, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := e.client.JobWait(ctx, n)
	if err != nil || job.State != idem.StateCompleted || string(job.Result) != `{"received":true}` {
		t.Fatalf("job %+v: %v", job, err)
	}
	r = e.req("GET", "/v1/jobs/"+id+"/attempts", e.admin, nil)
	expect(t, r, 200, "")
	att := r.json(t)["attempts"].([]any)[0].(map[string]any)
	if att["target"] != "orders" || att["http_status"] != float64(200) {
		t.Fatalf("attempt %v", att)
	}
	r = e.req("GET", "/v1/stats", e.admin, nil)
	expect(t, r, 200, "")
	ts, _ := r.json(t)["targets"].(map[string]any)["orders"].(map[string]any)
	if ts["attempts"] != float64(1) || ts["success_rate"] != float64(1) || ts["statuses"].(map[string]any)["200"] != float64(1) {
		t.Fatalf("stats of target orders: %s", r.body)
	}
	mu.Lock()
	if len(ids) != 1 || ids[0] != "job_"+id {
		t.Errorf("receiver saw webhook-ids %v, want [job_%s]", ids, id)
	}
	mu.Unlock()

	r = e.req("PUT", "/v1/targets/orders", e.admin, map[string]any{"url": rcv.URL, "kind": "k", "secrets": []string{}})
	expect(t, r, 200, "")
	if m := r.json(t); m["secret_count"] != float64(0) || m["secret"] != nil {
		t.Fatalf("replace reply %s", r.body)
	}
	expect(t, e.req("DELETE", "/v1/targets/orders", e.admin, nil), 204, "")
	expect(t, e.req("GET", "/v1/targets/orders", e.admin, nil), 404, "/problems/not-found")
	expect(t, e.req("GET", "/v1/targets/orders", e.keyA, nil), 404, "/problems/not-found")
}

// testTargetBadInput: 400 problems naming the field; nothing stored.
func testTargetBadInput(t *testing.T, open opener) {
	e := setup(t, open, nil)
	for field, body := range map[string]any{
		"url":     map[string]any{"url": "http://169.254.169.254/x", "queue": "q"},
		"queue":   map[string]any{"url": "http://127.0.0.1:9/x"},
		"secrets": map[string]any{"url": "http://127.0.0.1:9/x", "queue": "q", "secrets": []string{"nope"}},
		"timeout": map[string]any{"url": "http://127.0.0.1:9/x", "queue": "q", "timeout": "soon"},
		// Stored in whole milliseconds: 500µs would be 0, the default 30 s.
		"timeout 500us": map[string]any{"url": "http://127.0.0.1:9/x", "queue": "q", "timeout": "500us"},
		// A subject in the space NATS reserves for itself ($JS.API.…).
		"url $JS": map[string]any{"url": "nats://127.0.0.1:4222/$JS.API.STREAM.DELETE.ORDERS", "queue": "q"},
	} {
		field := strings.Fields(field)[0]
		r := e.req("PUT", "/v1/targets/t1", e.keyA, body)
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs[field] == nil {
			t.Errorf("%s: problem does not name the field: %s", field, r.body)
		}
	}
	r := e.req("GET", "/v1/targets", e.keyA, nil)
	expect(t, r, 200, "")
	if n := len(r.json(t)["targets"].([]any)); n != 0 {
		t.Fatalf("bad puts stored %d targets", n)
	}
}

// TestTargetURLPasswordMasked: a password or NATS token in the URL of a
// target or subscription is stored (deliveries use it) but never shown:
// the PUT reply, GET and the lists mask it as the database URL of
// --print-config is masked.
func TestTargetURLPasswordMasked(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, tc := range []struct{ path, url, shown string }{
		{"/v1/targets/stream", "nats://idem:s3cret@127.0.0.1:4222/orders", "nats://idem:xxxxx@127.0.0.1:4222/orders"},
		{"/v1/targets/tok", "nats://s3cret@127.0.0.1:4222/orders", "nats://xxxxx@127.0.0.1:4222/orders"},
		{"/v1/topics/orders/subscriptions/stream", "nats://idem:s3cret@127.0.0.1:4222/orders", "nats://idem:xxxxx@127.0.0.1:4222/orders"},
	} {
		body := map[string]any{"url": tc.url}
		if strings.HasPrefix(tc.path, "/v1/targets/") {
			body["queue"] = "q"
		}
		list := "/v1/targets"
		if strings.HasPrefix(tc.path, "/v1/topics/") {
			list = "/v1/topics/orders/subscriptions"
		}
		for _, r := range []*resp{e.req("PUT", tc.path, e.keyA, body), e.req("GET", tc.path, e.keyA, nil), e.req("GET", list, e.keyA, nil)} {
			if r.status/100 != 2 || strings.Contains(string(r.body), "s3cret") || !strings.Contains(string(r.body), tc.shown) {
				t.Errorf("%s: %d %s; want %s shown, never the password", tc.path, r.status, r.body, tc.shown)
			}
		}
	}
	// The stored URL keeps the credentials: the deliveries need them.
	got, err := e.client.TargetGet(context.Background(), "a", "stream")
	if err != nil || got.URL != "nats://idem:s3cret@127.0.0.1:4222/orders" {
		t.Fatalf("stored target %+v %v", got, err)
	}
}
