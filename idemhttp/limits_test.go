package idemhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/internal/windowtest"
)

// roomyRate is n jobs per an hour or a little more, in a window that does
// not end in the next five minutes: a test that spends a budget and then
// reads it must not see a new window (a whole hour passing between its
// requests failed it once in 3,600 runs).
func roomyRate(n int) string {
	return idem.FormatRate(n, windowtest.Period(time.Now(), time.Hour, 5*time.Minute))
}

// testLimits: admin keys set, read and delete limits; tenant keys see only
// their own and cannot change them; bad input is a 400 naming the field
// and stores nothing; stats show usage and throttling.
func testLimits(t *testing.T, open opener) {
	e := setup(t, open, nil)
	rate := roomyRate(2)
	r := e.req("PUT", "/v1/limits/tenant/a", e.admin, map[string]any{"rate": rate, "concurrency": 5})
	expect(t, r, 200, "")
	if m := r.json(t); m["tenant"] != "a" || m["rate"] != rate || m["concurrency"] != float64(5) {
		t.Fatalf("put limit = %s", r.body)
	}
	expect(t, e.req("PUT", "/v1/limits/queue/mail", e.admin, map[string]any{"rate": "1000/1m"}), 200, "")
	expect(t, e.req("PUT", "/v1/limits/tenant/b?queue=mail", e.admin, map[string]any{"concurrency": 1}), 200, "")
	// A time that does not exist is absent, never "" (API.md): a limit
	// without a rate has no window.
	r = e.req("GET", "/v1/limits/tenant/b?queue=mail", e.admin, nil)
	expect(t, r, 200, "")
	if ws, ok := r.json(t)["usage"].(map[string]any)["window_start"]; ok {
		t.Errorf("concurrency-only limit has window_start %q: %s", ws, r.body)
	}
	r = e.req("PUT", "/v1/limits/tenant/c", e.admin, map[string]any{"weight": 3})
	expect(t, r, 200, "")
	if r.json(t)["weight"] != float64(3) {
		t.Fatalf("put weight = %s", r.body)
	}

	for _, c := range []struct {
		path  string
		body  any
		field string
	}{
		{"/v1/limits/tenant/a", map[string]any{"rate": "fast"}, "rate"},
		{"/v1/limits/tenant/a", map[string]any{"rate": "0/1m"}, "rate"},
		{"/v1/limits/tenant/a", map[string]any{"concurrency": 0}, "concurrency"},
		{"/v1/limits/tenant/a", map[string]any{}, "rate"},
		{"/v1/limits/region/eu", map[string]any{"concurrency": 1}, "scope"},
		{"/v1/limits/queue/mail", map[string]any{"weight": 2}, "weight"},
	} {
		r := e.req("PUT", c.path, e.admin, c.body)
		expect(t, r, 400, "/problems/invalid-request")
		if r.json(t)["errors"].(map[string]any)[c.field] == nil {
			t.Errorf("PUT %s %v: problem %s does not name %s", c.path, c.body, r.body, c.field)
		}
	}
	expect(t, e.req("PUT", "/v1/limits/tenant/a", e.keyA, map[string]any{"rate": "1000/1m"}), 403, "/problems/forbidden")
	expect(t, e.req("DELETE", "/v1/limits/tenant/a", e.keyA, nil), 403, "/problems/forbidden")

	// The rate holds at claim time: two claims of tenant a, then none.
	for range 3 {
		e.enqueue(e.keyA, map[string]any{"kind": "k"})
	}
	r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"default"}, "worker_id": "w", "limit": 10})
	expect(t, r, 200, "")
	if n := len(r.json(t)["jobs"].([]any)); n != 2 {
		t.Fatalf("claim under a %s rate took %d jobs", rate, n)
	}

	r = e.req("GET", "/v1/limits", e.keyA, nil)
	expect(t, r, 200, "")
	ls := r.json(t)["limits"].([]any)
	if len(ls) != 1 {
		t.Fatalf("tenant a sees %d limits, want its own: %s", len(ls), r.body)
	}
	usage := ls[0].(map[string]any)["usage"].(map[string]any)
	if usage["window_used"] != float64(2) || usage["running"] != float64(2) || usage["throttled"] != float64(1) {
		t.Errorf("usage = %v, want 2 used, 2 running, 1 throttled claim", usage)
	}
	r = e.req("GET", "/v1/limits", e.admin, nil)
	expect(t, r, 200, "")
	if n := len(r.json(t)["limits"].([]any)); n != 4 {
		t.Errorf("admin sees %d limits, want 4", n)
	}
	expect(t, e.req("GET", "/v1/limits/tenant/b?queue=mail", e.admin, nil), 200, "")
	r = e.req("GET", "/v1/stats", e.keyA, nil)
	expect(t, r, 200, "")
	if n := len(r.json(t)["limits"].([]any)); n != 1 {
		t.Errorf("stats of tenant a show %d limits, want 1", n)
	}
	expect(t, e.req("DELETE", "/v1/limits/tenant/a", e.admin, nil), 204, "")
	expect(t, e.req("DELETE", "/v1/limits/tenant/a", e.admin, nil), 404, "/problems/not-found")
	expect(t, e.req("GET", "/v1/limits/tenant/a", e.admin, nil), 404, "/problems/not-found")
}

// testPause: pausing a queue stops claims, a tenant key pauses only its
// own work, resume lets claims through again.
func testPause(t *testing.T, open opener) {
	e := setup(t, open, nil)
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "mail"})
	e.enqueue(e.keyB, map[string]any{"kind": "k", "queue": "mail"})
	claimN := func(key string) int {
		r := e.req("POST", "/v1/claim", key, map[string]any{"queues": []string{"mail"}, "worker_id": "w", "limit": 10})
		expect(t, r, 200, "")
		return len(r.json(t)["jobs"].([]any))
	}
	r := e.req("POST", "/v1/queues/mail/pause", e.keyA, nil)
	expect(t, r, 200, "")
	if m := r.json(t); m["tenant"] != "a" || m["paused"] != true {
		t.Fatalf("tenant pause = %s", r.body)
	}
	expect(t, e.req("POST", "/v1/queues/mail/pause", e.keyA, map[string]any{"tenant": "b"}), 403, "/problems/forbidden")
	if n := claimN(e.keyA); n != 0 {
		t.Fatalf("tenant a claimed %d jobs of its paused work", n)
	}
	r = e.req("GET", "/v1/stats", e.keyA, nil)
	expect(t, r, 200, "")
	if n := len(r.json(t)["paused"].([]any)); n != 1 {
		t.Errorf("stats show %d paused scopes, want 1", n)
	}
	expect(t, e.req("POST", "/v1/queues/mail/pause", e.admin, nil), 200, "")
	if n := claimN(e.keyB); n != 0 {
		t.Fatalf("tenant b claimed %d jobs of a paused queue", n)
	}
	expect(t, e.req("POST", "/v1/queues/mail/resume", e.admin, nil), 200, "")
	if n := claimN(e.keyB); n != 1 {
		t.Fatalf("tenant b claimed %d jobs after resume, want 1", n)
	}
	expect(t, e.req("POST", "/v1/queues/mail/resume", e.keyA, nil), 200, "")
	if n := claimN(e.keyA); n != 1 {
		t.Fatalf("tenant a claimed %d jobs after resume, want 1", n)
	}
	expect(t, e.req("POST", "/v1/queues/mail/pause", e.admin, map[string]any{"tenant": "bad name"}), 400, "/problems/invalid-request")
}

// countingTransport counts the requests an idemclient sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// testClaimRefill: a pull claim that gets nothing because a rate limit is
// spent says when the budget returns (body and Retry-After), and
// idemclient.ClaimWait waits that long instead of polling.
func testClaimRefill(t *testing.T, open opener) {
	e := setup(t, open, nil)
	period := windowtest.Period(time.Now(), time.Hour, 5*time.Minute)
	expect(t, e.req("PUT", "/v1/limits/tenant/a", e.admin, map[string]any{"rate": idem.FormatRate(2, period)}), 200, "")
	for range 3 {
		e.enqueue(e.keyA, map[string]any{"kind": "k"})
	}
	claim := map[string]any{"queues": []string{"default"}, "worker_id": "w", "limit": 10}
	r := e.req("POST", "/v1/claim", e.keyA, claim)
	expect(t, r, 200, "")
	if m := r.json(t); len(m["jobs"].([]any)) != 2 || m["throttled"] != nil || r.header.Get("Retry-After") != "" {
		t.Fatalf("first claim under a rate of 2: %s %v", r.body, r.header)
	}
	before := time.Now()
	r = e.req("POST", "/v1/claim", e.keyA, claim)
	expect(t, r, 200, "")
	m := r.json(t)
	if len(m["jobs"].([]any)) != 0 || m["throttled"] != true {
		t.Fatalf("claim of a spent rate: %s", r.body)
	}
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["next_available_at"]))
	if err != nil {
		t.Fatalf("next_available_at: %v in %s", err, r.body)
	}
	// A rate's window is aligned to its period since the epoch.
	if want := windowtest.End(before, period); !at.Equal(want) {
		t.Errorf("next_available_at = %s, want the end of the window %s", at, want)
	}
	after, err := time.ParseDuration(fmt.Sprint(m["retry_after"]))
	if err != nil || after <= 0 || after > period {
		t.Errorf("retry_after = %v (%v), want within the period", m["retry_after"], err)
	}
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > int(period/time.Second) || time.Duration(secs)*time.Second < after {
		t.Errorf("Retry-After = %q, want whole seconds covering retry_after %s", r.header.Get("Retry-After"), after)
	}
	// A tenant without a limit is not throttled.
	r = e.req("POST", "/v1/claim", e.keyB, claim)
	expect(t, r, 200, "")
	if r.json(t)["throttled"] != nil {
		t.Errorf("claim of an unlimited tenant says throttled: %s", r.body)
	}

	// idemclient: a short window; the claim after a spent one waits for
	// the refill the server names, so it takes a few requests, not a poll
	// loop.
	expect(t, e.req("PUT", "/v1/limits/tenant/b", e.admin, map[string]any{"rate": "1/2s"}), 200, "")
	for range 2 {
		e.enqueue(e.keyB, map[string]any{"kind": "k"})
	}
	tr := &countingTransport{}
	cl, err := idemclient.New(e.srv.URL, &idemclient.Config{APIKey: e.keyB, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := &idemclient.ClaimRequest{Queues: []string{"default"}, WorkerID: "w", Wait: time.Millisecond}
	for i := range 2 {
		jobs, err := cl.ClaimWait(ctx, req)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("ClaimWait %d: %d jobs, %v", i, len(jobs), err)
		}
	}
	// First claim, then at most: one throttled answer, one claim after the
	// refill (and one more if the refill raced the window's edge).
	if n := tr.n.Load(); n > 4 {
		t.Errorf("ClaimWait sent %d requests for 2 jobs under 1/2s: it polled instead of waiting for retry_after", n)
	}
}

// testDefaultLimits: a limit of tenant "*" (in the path as is or escaped)
// gives every tenant its own budget; a tenant key sees it with its own
// usage; "*" is refused as the tenant an admin key acts for.
func testDefaultLimits(t *testing.T, open opener) {
	e := setup(t, open, nil)
	rate := roomyRate(2)
	r := e.req("PUT", "/v1/limits/tenant/*", e.admin, map[string]any{"rate": rate})
	expect(t, r, 200, "")
	if m := r.json(t); m["tenant"] != "*" || m["rate"] != rate {
		t.Fatalf("put default limit = %s", r.body)
	} else if ws, ok := m["usage"].(map[string]any)["window_start"]; ok {
		// The default itself has no window (each tenant has its own): a
		// time that does not exist is absent (API.md), not year 1.
		t.Errorf("default limit's window_start = %v, want absent", ws)
	}
	expect(t, e.req("PUT", "/v1/limits/tenant/%2A?queue=mail", e.admin, map[string]any{"concurrency": 1}), 200, "")
	expect(t, e.req("PUT", "/v1/limits/tenant/*", e.admin, map[string]any{"weight": 2}), 400, "/problems/invalid-request")
	for range 3 {
		e.enqueue(e.keyA, map[string]any{"kind": "k"})
		e.enqueue(e.keyB, map[string]any{"kind": "k"})
	}
	claim := map[string]any{"queues": []string{"default"}, "worker_id": "w", "limit": 10}
	for _, key := range []string{e.keyA, e.keyB} {
		r := e.req("POST", "/v1/claim", key, claim)
		expect(t, r, 200, "")
		if n := len(r.json(t)["jobs"].([]any)); n != 2 {
			t.Fatalf("claim under a default of %s took %d jobs, want the tenant's own 2", rate, n)
		}
		r = e.req("POST", "/v1/claim", key, claim)
		expect(t, r, 200, "")
		if m := r.json(t); len(m["jobs"].([]any)) != 0 || m["throttled"] != true {
			t.Fatalf("claim of a spent default: %s", r.body)
		}
	}
	r = e.req("GET", "/v1/limits/tenant/*", e.keyA, nil)
	expect(t, r, 200, "")
	if u := r.json(t)["usage"].(map[string]any); u["window_used"] != float64(2) || u["running"] != float64(2) {
		t.Errorf("tenant a's usage of the default = %v, want 2 started and running", u)
	}
	r = e.req("GET", "/v1/limits", e.admin, nil)
	expect(t, r, 200, "")
	if n := len(r.json(t)["limits"].([]any)); n != 2 {
		t.Errorf("admin sees %d limits, want the 2 defaults: %s", n, r.body)
	}
	r = e.req("POST", "/v1/jobs", e.admin, map[string]any{"kind": "k"}, "Idem-Tenant", "*")
	expect(t, r, 400, "/problems/invalid-request")
	if r.json(t)["errors"].(map[string]any)["Idem-Tenant"] == nil {
		t.Errorf("enqueue for tenant *: problem %s does not name Idem-Tenant", r.body)
	}
	expect(t, e.req("DELETE", "/v1/limits/tenant/%2A", e.admin, nil), 204, "")
	expect(t, e.req("GET", "/v1/limits/tenant/*", e.admin, nil), 404, "/problems/not-found")
}
