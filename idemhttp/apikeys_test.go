package idemhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// TestRevokeAPIKey: DELETE /v1/apikeys/{id} revokes a key and this node
// refuses it at once, although its cache would trust the key for an hour;
// only admin keys may revoke, and an unknown id is 404.
func TestRevokeAPIKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{AuthCacheTTL: time.Hour}})
	secret, k := idemhttp.NewAPIKey("a", false, "to revoke", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	expect(t, e.req("GET", "/v1/jobs?queue=default", secret, nil), 200, "") // verified and cached

	t.Run("a tenant key may not revoke", func(t *testing.T) {
		r := e.req("DELETE", "/v1/apikeys/"+k.ID, e.keyA, nil)
		expect(t, r, 403, "/problems/forbidden")
		if d, _ := r.json(t)["detail"].(string); !strings.Contains(d, "API keys") {
			t.Fatalf("the refusal says %q; want it to name API keys", d)
		}
		expect(t, e.req("GET", "/v1/jobs?queue=default", secret, nil), 200, "")
	})
	t.Run("an unknown key is not found", func(t *testing.T) {
		expect(t, e.req("DELETE", "/v1/apikeys/key_nope", e.admin, nil), 404, "/problems/not-found")
	})
	t.Run("a revoked key is refused at once on this node", func(t *testing.T) {
		expect(t, e.req("DELETE", "/v1/apikeys/"+k.ID, e.admin, nil), 204, "")
		expect(t, e.req("GET", "/v1/jobs?queue=default", secret, nil), 401, "/problems/unauthorized")
		expect(t, e.req("DELETE", "/v1/apikeys/"+k.ID, e.admin, nil), 204, "") // again: no error
		keys, err := e.st.APIKeyList(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range keys {
			if got.ID == k.ID && got.RevokedAt == nil {
				t.Fatal("the key is not revoked in the store")
			}
		}
	})
}

// TestAuthorizationHeaderForms: the scheme is case-insensitive and spaces
// around the key are ignored; anything else that is not "Bearer <key of at
// most 512 bytes>" asks for a key, and a well-formed unknown key is an
// invalid token; each 401 carries its WWW-Authenticate challenge.
func TestAuthorizationHeaderForms(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	const ask, invalid = "send an API key as Authorization: Bearer <key>", "unknown or revoked API key"
	cases := []struct {
		name, header string
		status       int
		challenge    string
		detail       string
	}{
		{"no header", "", 401, `Bearer realm="idem"`, ask},
		{"basic scheme", "Basic YTpi", 401, `Bearer realm="idem"`, ask},
		{"scheme alone", "Bearer", 401, `Bearer realm="idem"`, ask},
		{"scheme and spaces", "Bearer    ", 401, `Bearer realm="idem"`, ask},
		{"key too long", "Bearer " + strings.Repeat("k", 513), 401, `Bearer realm="idem"`, ask},
		{"unknown key", "Bearer idem_unknown", 401, `Bearer realm="idem", error="invalid_token"`, invalid},
		{"lower-case scheme", "bearer " + e.keyA, 200, "", ""},
		{"upper-case scheme", "BEARER " + e.keyA, 200, "", ""},
		{"spaces around the key", "Bearer   " + e.keyA + "  ", 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := []string{"Authorization", c.header}
			r := e.req("GET", "/v1/jobs", "", nil, hdr...)
			if c.status == 200 {
				expect(t, r, 200, "")
				return
			}
			expect(t, r, c.status, "/problems/unauthorized")
			if got := r.header.Get("WWW-Authenticate"); got != c.challenge {
				t.Fatalf("challenge %q, want %q", got, c.challenge)
			}
			if d := r.json(t)["detail"]; d != c.detail {
				t.Fatalf("detail %q, want %q", d, c.detail)
			}
		})
	}
}

// TestRevokeEndsTheKeysLongPoll: a long-polling claim made with a key that
// is then revoked through this node hands out no job enqueued after the
// revocation: the poll ends with 401 and the job stays available. The 401
// answers the key, not the request: the claim retried with its
// Idempotency-Key and another key of the tenant runs and gets the job.
func TestRevokeEndsTheKeysLongPoll(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{AuthCacheTTL: time.Hour}})
	idemhttp.InitClaimSignal(e.server)
	secret, k := idemhttp.NewAPIKey("a", false, "worker", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	const claim = `{"queues":["lp"],"worker_id":"w","wait":"30s"}`
	got := longPoll(e.srv, secret, claim, "poll-1")
	idemhttp.WaitClaim(t, e.server)
	expect(t, e.req("DELETE", "/v1/apikeys/"+k.ID, e.admin, nil), 204, "")
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "lp", "args": map[string]string{"card": "4111"}})

	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.status != http.StatusUnauthorized {
		t.Fatalf("the revoked key's long poll answered %d %s, want 401", a.status, a.body)
	}
	var p map[string]any
	if err := json.Unmarshal(a.body, &p); err != nil || p["type"] != "/problems/unauthorized" {
		t.Fatalf("problem %s (%v), want /problems/unauthorized", a.body, err)
	}
	if st := e.req("GET", "/v1/jobs/"+id, e.keyA, nil).json(t)["state"]; st != "available" {
		t.Fatalf("job %s is %v after the revoked key's poll, want available", id, st)
	}
	r := e.req("POST", "/v1/claim", e.keyA, claim, "Idempotency-Key", "poll-1")
	expect(t, r, 200, "")
	if jobs, _ := r.json(t)["jobs"].([]any); len(jobs) != 1 || jobs[0].(map[string]any)["id"] != id {
		t.Fatalf("the claim retried with another key got %s, want job %s", r.body, id)
	}
}

// TestRevokeOnAnotherNodeEndsTheKeysLongPoll: a key revoked through one
// node ends its long polls waiting on another node (which is told nothing)
// within that node's key cache, not at the end of their wait: a job
// enqueued after that goes to no revoked key. Before, such a poll ran for
// its whole wait (up to a minute) and took any job enqueued meanwhile.
func TestRevokeOnAnotherNodeEndsTheKeysLongPoll(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	// Node B: another server over the same client and store, with a short
	// key cache.
	b, err := idemhttp.NewServer(e.client, e.st, &idemhttp.Config{AuthCacheTTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	idemhttp.InitClaimSignal(b)
	srvB := httptest.NewServer(b)
	t.Cleanup(srvB.Close)
	secret, k := idemhttp.NewAPIKey("a", false, "worker", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	// The wait is far longer than B's cache: a poll that runs to its end
	// (the bug) answers 200 with no job.
	got := longPoll(srvB, secret, `{"queues":["lp"],"worker_id":"w","wait":"20s"}`, "")
	idemhttp.WaitClaim(t, b)
	expect(t, e.req("DELETE", "/v1/apikeys/"+k.ID, e.admin, nil), 204, "")
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.status != http.StatusUnauthorized {
		t.Fatalf("the long poll on the other node answered %d %s, want 401", a.status, a.body)
	}
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "lp"})
	if st := e.req("GET", "/v1/jobs/"+id, e.keyA, nil).json(t)["state"]; st != "available" {
		t.Fatalf("job %s is %v, want available", id, st)
	}
}

// pollAnswer is the answer of a long poll (longPoll).
type pollAnswer struct {
	status int
	body   []byte
	err    error
}

// longPoll sends the claim body to srv with the API key secret (and the
// Idempotency-Key idemKey unless empty) in the background; its answer
// arrives on the channel.
func longPoll(srv *httptest.Server, secret, body, idemKey string) <-chan pollAnswer {
	got := make(chan pollAnswer, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/claim", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if idemKey != "" {
			req.Header.Set("Idempotency-Key", idemKey)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := srv.Client().Do(req)
		if err != nil {
			got <- pollAnswer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- pollAnswer{status: res.StatusCode, body: b, err: err}
	}()
	return got
}
