package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/webhook"
)

// received is one request a receiver saw.
type received struct {
	id      string // webhook-id
	attempt string // Idem-Attempt
	at      time.Time
	body    []byte
}

// receiver is a real HTTP endpoint on 127.0.0.1 that verifies signatures
// (when it has secrets), records every request and answers with reply.
type receiver struct {
	srv     *httptest.Server
	secrets []webhook.Secret
	reply   func(n int, w http.ResponseWriter) // n: 1 for the first request

	mu       sync.Mutex
	requests []received
	badSigs  int
}

func newReceiver(t *testing.T, secrets []webhook.Secret, reply func(n int, w http.ResponseWriter)) *receiver {
	t.Helper()
	r := &receiver{secrets: secrets, reply: reply}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	if len(r.secrets) > 0 && webhook.Verify(r.secrets, req.Header, body, time.Now(), 0) != nil {
		r.badSigs++
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.requests = append(r.requests, received{id: req.Header.Get("webhook-id"), attempt: req.Header.Get("Idem-Attempt"), at: time.Now(), body: body})
	n := len(r.requests)
	r.mu.Unlock()
	r.reply(n, w)
}

func (r *receiver) seen() ([]received, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...), r.badSigs
}

// deliveryConfig is a client delivering queue "hooks" with fast retries.
func deliveryConfig() *idem.Config {
	return &idem.Config{
		Queues:       map[string]idem.QueueConfig{"hooks": {MaxWorkers: 10, Deliver: true}},
		RetryByQueue: map[string]idem.RetryPolicy{"hooks": {Delays: []time.Duration{10 * time.Millisecond}, Jitter: -1}},
		PollInterval: 20 * time.Millisecond,
	}
}

func mustSecret(t *testing.T) webhook.Secret {
	t.Helper()
	s, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func enqueueHook(t *testing.T, c *idem.Client, kind, key string) *idem.JobRow {
	t.Helper()
	res, err := c.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: kind, Args: json.RawMessage(`{"order":42}`),
		Opts: &idem.EnqueueOpts{Queue: "hooks", IdempotencyKey: key}})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return res.Job
}

// testFlakyDelivery: 500, 503, then 200: the job completes with the
// response body as result after three signed attempts with one webhook-id,
// and the attempt log names the target and the HTTP statuses.
func testFlakyDelivery(t *testing.T, b *bundle) {
	ctx := context.Background()
	sec := mustSecret(t)
	rcv := newReceiver(t, []webhook.Secret{sec}, func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "database down")
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	})
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "orders", Queue: "hooks", URL: rcv.srv.URL, Secrets: []webhook.Secret{sec}}); err != nil {
		t.Fatalf("put target: %v", err)
	}
	b.start(t)
	job := enqueueHook(t, b.client, "order.shipped", "order-42:shipped")
	row := waitState(t, b, job.ID, idem.StateCompleted)
	if string(row.Result) != `{"ok":true}` {
		t.Errorf("result = %s, want the response body", row.Result)
	}
	reqs, bad := rcv.seen()
	if bad != 0 || len(reqs) != 3 {
		t.Fatalf("receiver saw %d requests (%d badly signed), want 3 signed", len(reqs), bad)
	}
	for i, r := range reqs {
		if r.id != "order-42:shipped" {
			t.Errorf("request %d webhook-id = %q, want the idempotency key", i+1, r.id)
		}
	}
	atts, err := b.client.JobAttempts(ctx, "", job.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := []int{500, 503, 200}
	if len(atts) != 3 {
		t.Fatalf("%d attempts, want 3", len(atts))
	}
	for i, a := range atts {
		if a.Target != "orders" || a.HTTPStatus != wantStatus[i] {
			t.Errorf("attempt %d: target %q status %d, want orders %d", i+1, a.Target, a.HTTPStatus, wantStatus[i])
		}
	}
	if want := `response: "database down"`; !strings.Contains(atts[0].Error, want) {
		t.Errorf("attempt 1 error %q lacks the response excerpt %s", atts[0].Error, want)
	}
	stats, err := b.client.TargetStats(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Target != "orders" || stats[0].Attempts != 3 || stats[0].Completed != 1 ||
		stats[0].Retried != 2 || stats[0].Statuses[500] != 1 || stats[0].SuccessRate < 0.33 || stats[0].SuccessRate > 0.34 {
		t.Errorf("target stats = %+v", stats[0])
	}
}

func TestDeliveryFlakyReceiver(t *testing.T) {
	t.Parallel()
	bothBundles(t, deliveryConfig, testFlakyDelivery)
}

// TestDeliveryGone: 410 Gone is dead at once, with its status in the log.
func TestDeliveryGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, deliveryConfig())
	rcv := newReceiver(t, nil, func(int, http.ResponseWriter) {})
	rcv.reply = func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) }
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "gone", Kind: "user.deleted", URL: rcv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	job := enqueueHook(t, b.client, "user.deleted", "")
	waitState(t, b, job.ID, idem.StateDead)
	atts, err := b.client.JobAttempts(ctx, "", job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 1 || atts[0].HTTPStatus != 410 || atts[0].Target != "gone" || atts[0].Outcome != idemtype.OutcomeDead {
		t.Fatalf("attempts = %+v, want one dead attempt with 410", atts)
	}
	if reqs, _ := rcv.seen(); len(reqs) != 1 || reqs[0].id != "job_"+itoa(job.ID) {
		t.Fatalf("receiver saw %+v, want one request with webhook-id job_<id>", reqs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestDeliveryRetryAfter: a 429 with Retry-After: 1 delays the next attempt
// by at least a second although the backoff is 10ms.
func TestDeliveryRetryAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, deliveryConfig())
	rcv := newReceiver(t, nil, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "limited", Queue: "hooks", URL: rcv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	job := enqueueHook(t, b.client, "x", "")
	row := waitState(t, b, job.ID, idem.StateCompleted)
	if row.Result != nil {
		t.Errorf("204 result = %s, want none", row.Result)
	}
	reqs, _ := rcv.seen()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < time.Second {
		t.Errorf("second attempt %v after the 429, want >= Retry-After 1s", gap)
	}
}

// TestDeliverySlowTargetDoesNotStallOthers: while one endpoint hangs with
// every slot of its cap taken, the jobs of another target in the same queue
// complete; then the slow one catches up.
func TestDeliverySlowTargetDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := deliveryConfig()
	cfg.Delivery = &idem.DeliveryConfig{Webhook: &webhook.Config{MaxPerTarget: 2}}
	b := setup(t, cfg)
	release := make(chan struct{})
	slow := newReceiver(t, nil, func(_ int, w http.ResponseWriter) { <-release })
	fast := newReceiver(t, nil, func(_ int, w http.ResponseWriter) {})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	for _, tg := range []*idem.Target{{Name: "slow", Kind: "slow", URL: slow.srv.URL}, {Name: "fast", Kind: "fast", URL: fast.srv.URL}} {
		if _, err := b.client.TargetPut(ctx, tg); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t)
	var slowJobs []*idem.JobRow
	for range 12 {
		slowJobs = append(slowJobs, enqueueHook(t, b.client, "slow", ""))
	}
	for range 12 {
		job := enqueueHook(t, b.client, "fast", "")
		waitState(t, b, job.ID, idem.StateCompleted)
	}
	if reqs, _ := slow.seen(); len(reqs) > 2 {
		t.Errorf("slow target got %d concurrent pushes, cap is 2", len(reqs))
	}
	close(release)
	for _, j := range slowJobs {
		waitState(t, b, j.ID, idem.StateCompleted)
	}
}

// TestTargetPutInvalid: bad targets are refused naming the field, nothing
// is stored, and listed targets never carry their secrets.
func TestTargetPutInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	for name, tg := range map[string]*idem.Target{
		"url":      {Name: "a", Queue: "q", URL: "ftp://example.com/x"},
		"name":     {Queue: "q", URL: "http://127.0.0.1:9/x"},
		"queue":    {Name: "a", URL: "http://127.0.0.1:9/x"},
		"secrets":  {Name: "a", Queue: "q", URL: "http://127.0.0.1:9/x", Secrets: []webhook.Secret{{}}},
		"metadata": {Name: "a", Queue: "q", URL: "http://169.254.169.254/latest"},
		// Stored in whole milliseconds, 500µs was 0: the default 30 s.
		"timeout": {Name: "a", Queue: "q", URL: "http://127.0.0.1:9/x", Timeout: 500 * time.Microsecond},
		// The kinds of subscriptions' delivery jobs: a plain target of
		// one would take that subscription's events (it ranks first).
		"kind": {Name: "a", Queue: "topics", Kind: idem.TopicKindPrefix + "orders/billing", URL: "http://127.0.0.1:9/x"},
	} {
		_, err := b.client.TargetPut(ctx, tg)
		var inv *idemtype.InvalidError
		want := name
		if name == "metadata" {
			want = "url"
		}
		if !errors.As(err, &inv) || inv.Field != want {
			t.Errorf("%s: err %v, want an InvalidError on %q", name, err, want)
		}
	}
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "ok", Queue: "q", URL: "http://127.0.0.1:9/x", Secrets: []webhook.Secret{mustSecret(t)},
		Timeout: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	list, err := b.client.TargetList(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Secrets != nil || list[0].SecretCount != 1 || list[0].Timeout != time.Millisecond {
		t.Fatalf("list = %+v, want one target with SecretCount 1, no secrets and the timeout 1ms", list)
	}
}

// TestDeliveryNamedTarget: a job whose metadata names a target goes there,
// over the queue's target; a job naming an unknown target retries with an
// error saying so.
func TestDeliveryNamedTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := deliveryConfig()
	cfg.MaxAttempts = 2
	b := setup(t, cfg)
	queueRcv := newReceiver(t, nil, func(int, http.ResponseWriter) {})
	namedRcv := newReceiver(t, nil, func(int, http.ResponseWriter) {})
	for _, tg := range []*idem.Target{{Name: "queue", Queue: "hooks", URL: queueRcv.srv.URL}, {Name: "special", Kind: "unused", URL: namedRcv.srv.URL}} {
		if _, err := b.client.TargetPut(ctx, tg); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t)
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "x", Opts: &idem.EnqueueOpts{Queue: "hooks",
		Metadata: json.RawMessage(`{"delivery_target":"special","other":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, b, res.Job.ID, idem.StateCompleted)
	if q, _ := queueRcv.seen(); len(q) != 0 {
		t.Errorf("queue target got %d pushes", len(q))
	}
	if n, _ := namedRcv.seen(); len(n) != 1 {
		t.Errorf("named target got %d pushes, want 1", len(n))
	}
	res, err = b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "x", Opts: &idem.EnqueueOpts{Queue: "hooks",
		Metadata: json.RawMessage(`{"delivery_target":"nope"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	row := waitState(t, b, res.Job.ID, idem.StateDead)
	if !strings.Contains(row.LastError, `job names target "nope"`) {
		t.Errorf("last error %q", row.LastError)
	}
}

// testDeliveryResultNotUTF8: a receiver that answers 200 with JSON that is
// not valid UTF-8 (a Latin-1 server) completes its job once on either store,
// its result the text with the bad bytes replaced, never a finish that the
// store refuses (PostgreSQL's json column takes UTF-8 only) and that would
// send the job again.
func testDeliveryResultNotUTF8(t *testing.T, b *bundle) {
	ctx := context.Background()
	rcv := newReceiver(t, nil, func(_ int, w http.ResponseWriter) { _, _ = w.Write([]byte("{\"name\":\"caf\xe9\"}")) })
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "latin1", Queue: "hooks", URL: rcv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	job := enqueueHook(t, b.client, "x", "latin-1")
	row := waitState(t, b, job.ID, idem.StateCompleted)
	if want := "{\"name\":\"caf\ufffd\"}"; string(row.Result) != want {
		t.Errorf("result %s, want %s", row.Result, want)
	}
	if reqs, _ := rcv.seen(); len(reqs) != 1 {
		t.Errorf("receiver saw %d requests, want 1", len(reqs))
	}
}

func TestDeliveryResultNotUTF8(t *testing.T) {
	t.Parallel()
	cfg := deliveryConfig()
	cfg.MaxAttempts, cfg.LeaseDuration, cfg.RescueInterval = 1, time.Second, 50*time.Millisecond
	bothBundles(t, func() *idem.Config { return cfg }, testDeliveryResultNotUTF8)
}

// TestDeliveryIDAcrossTenants: a receiver shared by tenants sees a
// different webhook-id for two tenants' jobs with the same idempotency key
// (the default tenant's is the key, another's "<tenant> <key>"), so one
// that deduplicates on webhook-id takes both; the signature covers the id.
func TestDeliveryIDAcrossTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sec := mustSecret(t)
	rcv := newReceiver(t, []webhook.Secret{sec}, func(int, http.ResponseWriter) {})
	b := setup(t, deliveryConfig())
	tenants := []string{idem.DefaultTenant, "acme"}
	for _, tenant := range tenants {
		if _, err := b.client.TargetPut(ctx, &idem.Target{Tenant: tenant, Name: "shared", Queue: "hooks",
			URL: rcv.srv.URL, Secrets: []webhook.Secret{sec}}); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t)
	for _, tenant := range tenants {
		res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "ship", Args: json.RawMessage(`{}`),
			Opts: &idem.EnqueueOpts{Tenant: tenant, Queue: "hooks", IdempotencyKey: "order-1"}})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, b, res.Job.ID, idem.StateCompleted)
	}
	reqs, bad := rcv.seen()
	if bad != 0 || len(reqs) != 2 {
		t.Fatalf("receiver saw %d requests (%d badly signed), want 2", len(reqs), bad)
	}
	if reqs[0].id != "order-1" || reqs[1].id != "acme order-1" {
		t.Errorf("webhook-ids %q and %q, want %q and %q", reqs[0].id, reqs[1].id, "order-1", "acme order-1")
	}
}
