package idemhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/idemhttp"
)

// counting returns a handler that answers status with body and counts its calls.
func counting(calls *atomic.Int64, status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func TestMiddlewareLimits(t *testing.T) {
	t.Parallel()

	t.Run("a body over the limit is 413 and the handler never runs", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, &idemhttp.MiddlewareConfig{MaxBodyBytes: 8}, counting(&calls, 200, "ok"))
		expect(t, post(t, srv.URL+"/x", "k", "123456789"), 413, "/problems/payload-too-large")
		if r := post(t, srv.URL+"/x", "k2", "12345678"); r.status != 200 {
			t.Fatalf("a body at the limit: %d", r.status)
		}
		if calls.Load() != 1 {
			t.Fatalf("%d calls", calls.Load())
		}
	})

	t.Run("a response over the limit is not stored: the retry runs again", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, &idemhttp.MiddlewareConfig{MaxResponseBytes: 10}, counting(&calls, 200, strings.Repeat("x", 11)))
		r1 := post(t, srv.URL+"/x", "k", "")
		r2 := post(t, srv.URL+"/x", "k", "")
		if r1.status != 200 || len(r1.body) != 11 || r2.status != 200 || r2.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
			t.Fatalf("r1 %d %q, r2 %d %v, calls %d", r1.status, r1.body, r2.status, r2.header, calls.Load())
		}
	})

	t.Run("a response at the limit is stored whole", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, &idemhttp.MiddlewareConfig{MaxResponseBytes: 10}, counting(&calls, 200, strings.Repeat("y", 10)))
		post(t, srv.URL+"/x", "k", "")
		r := post(t, srv.URL+"/x", "k", "")
		if string(r.body) != strings.Repeat("y", 10) || r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
			t.Fatalf("replay %q %v, calls %d", r.body, r.header, calls.Load())
		}
	})
}

func TestMiddlewarePolicies(t *testing.T) {
	t.Parallel()

	t.Run("a custom Keep stores only what it accepts", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		only2xx := func(status int) bool { return status < 300 }
		srv := mwServer(t, &idemhttp.MiddlewareConfig{Keep: only2xx}, counting(&calls, 409, "conflict"))
		post(t, srv.URL+"/x", "k", "")
		if r := post(t, srv.URL+"/x", "k", ""); r.status != 409 || r.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
			t.Fatalf("a refused 409 was replayed: %d %v calls %d", r.status, r.header, calls.Load())
		}
	})

	t.Run("by default a 4xx is stored and replayed", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, nil, counting(&calls, 400, "bad"))
		post(t, srv.URL+"/x", "k", "")
		if r := post(t, srv.URL+"/x", "k", ""); r.status != 400 || string(r.body) != "bad" || r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
			t.Fatalf("4xx: %d %q %v calls %d", r.status, r.body, r.header, calls.Load())
		}
	})

	t.Run("a handler that writes without WriteHeader is a stored 200", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			_, _ = io.WriteString(w, "part1,")
			_, _ = io.WriteString(w, "part2")
		})
		post(t, srv.URL+"/x", "k", "")
		if r := post(t, srv.URL+"/x", "k", ""); r.status != 200 || string(r.body) != "part1,part2" || calls.Load() != 1 {
			t.Fatalf("implicit 200: %d %q calls %d", r.status, r.body, calls.Load())
		}
	})

	t.Run("a quoted key is the same key", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, nil, counting(&calls, 201, "made"))
		post(t, srv.URL+"/x", `"order-9"`, "")
		if r := post(t, srv.URL+"/x", "order-9", ""); r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
			t.Fatalf("quoted and bare keys differ: %v calls %d", r.header, calls.Load())
		}
	})

	t.Run("keys are scoped by the Tenant function", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		byHeader := func(r *http.Request) string { return r.Header.Get("X-Account") }
		srv := mwServer(t, &idemhttp.MiddlewareConfig{Tenant: byHeader}, counting(&calls, 200, "ok"))
		post(t, srv.URL+"/x", "k", "", "X-Account", "acme")
		post(t, srv.URL+"/x", "k", "", "X-Account", "globex")
		if calls.Load() != 2 {
			t.Fatalf("one key across tenants ran %d times", calls.Load())
		}
		if r := post(t, srv.URL+"/x", "k", "", "X-Account", "acme"); r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 2 {
			t.Fatalf("acme's replay: %v calls %d", r.header, calls.Load())
		}
	})

	t.Run("a replay carries no stale transport headers", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Add("X-Multi", "a")
			w.Header().Add("X-Multi", "b")
			w.WriteHeader(202)
			_, _ = io.WriteString(w, "accepted")
		})
		r1 := post(t, srv.URL+"/x", "k", "")
		r2 := post(t, srv.URL+"/x", "k", "")
		if got := r2.header.Values("X-Multi"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
			t.Fatalf("multi-valued header replayed as %v", got)
		}
		if r1.header.Get("Date") == "" || r2.header.Get("Content-Length") != "8" {
			t.Fatalf("transport headers: first %v, replay %v", r1.header, r2.header)
		}
	})
}

// TestReplayCarriesThisRequestsHeaders: a replayed answer is the stored
// answer of the handler, but the headers the outer layers set for this
// request (its X-Request-Id, the CORS origin it came from) are this
// request's, not the first request's.
func TestReplayCarriesThisRequestsHeaders(t *testing.T) {
	t.Parallel()
	cfg := &idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"https://one.example", "https://two.example"}}}
	e := setup(t, openSQLite, &setupOpts{serverCfg: cfg})
	id := e.enqueue(e.keyA, map[string]any{"kind": "k"})
	path := "/v1/jobs/" + id + "/cancel"
	r1 := e.req("POST", path, e.keyA, nil, "Idempotency-Key", "c1", "X-Request-Id", "req-one", "Origin", "https://one.example")
	expect(t, r1, 200, "")
	r2 := e.req("POST", path, e.keyA, nil, "Idempotency-Key", "c1", "X-Request-Id", "req-two", "Origin", "https://two.example")
	expect(t, r2, 200, "")
	if r2.header.Get("Idempotent-Replayed") != "true" || string(r2.body) != string(r1.body) {
		t.Fatalf("not a replay: %v %s", r2.header, r2.body)
	}
	if got := r2.header.Get("X-Request-Id"); got != "req-two" {
		t.Errorf("replay X-Request-Id %q, want this request's req-two", got)
	}
	if got := r2.header.Get("Access-Control-Allow-Origin"); got != "https://two.example" {
		t.Errorf("replay Access-Control-Allow-Origin %q, want this request's origin", got)
	}
	if got := r2.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("replay Content-Type %q, want the stored application/json", got)
	}
}

// TestMiddlewareReplaysHeadersOfAnEmptyAnswer: a handler that only sets
// headers and returns (net/http then answers 200 with them, no body) is
// replayed with those headers. They were lost: the capture read the
// handler's headers only on a WriteHeader or Write call, so the replay was
// a bare 200 without the X-Order-Id the client needs.
func TestMiddlewareReplaysHeadersOfAnEmptyAnswer(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Order-Id", fmt.Sprint(calls.Add(1)))
	})
	r1 := post(t, srv.URL+"/orders", "k", "{}")
	r2 := post(t, srv.URL+"/orders", "k", "{}")
	if r1.status != 200 || r1.header.Get("X-Order-Id") != "1" {
		t.Fatalf("first answer: %d %v", r1.status, r1.header)
	}
	if r2.status != 200 || r2.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
		t.Fatalf("repeat: %d %v, %d calls; want a replay", r2.status, r2.header, calls.Load())
	}
	if got := r2.header.Get("X-Order-Id"); got != "1" {
		t.Errorf("replayed X-Order-Id %q, want the stored 1", got)
	}
}

// TestMiddlewarePassesInformationalAnswers: a handler that sends 103 Early
// Hints before its 201 answers 201, first and on replay. The capture took
// the 103 for the answer: it swallowed the 201 (the client got an implicit
// 200) and stored 103 for the replay.
func TestMiddlewarePassesInformationalAnswers(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
	})
	r1 := post(t, srv.URL+"/orders", "k", "{}")
	r2 := post(t, srv.URL+"/orders", "k", "{}")
	if r1.status != http.StatusCreated || string(r1.body) != "made" {
		t.Errorf("first answer: %d %q, want 201 made", r1.status, r1.body)
	}
	if r2.status != http.StatusCreated || string(r2.body) != "made" || r2.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %q %v, want the stored 201 made", r2.status, r2.body, r2.header)
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls, want 1", calls.Load())
	}
}

// TestMiddlewareReplayIsByteIdentical: a replay sends the stored answer's
// body and header values byte for byte, whatever bytes they hold: HTML
// characters, U+2028, bytes that are not UTF-8 (obs-text such as a
// Latin-1 file name, which net/http sends as it is). Header values went
// through JSON in the stored envelope, which wrote invalid UTF-8 as
// U+FFFD: the replay sent other bytes than the answer.
func TestMiddlewareReplayIsByteIdentical(t *testing.T) {
	t.Parallel()
	const (
		disposition = "attachment; filename=\"caf\xe9 <1>&\u2028.txt\""
		body        = "<b>&amp;\u2028\xff\xfe\x00\"\\"
	)
	var calls atomic.Int64
	srv := mwServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Disposition", disposition)
		w.Header()["X-Raw\xe9"] = []string{"v"} // a name net/http refuses to send: not sent either time
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	first := post(t, srv.URL+"/x", "k", "")
	again := post(t, srv.URL+"/x", "k", "")
	if again.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
		t.Fatalf("not replayed: %v, %d calls", again.header, calls.Load())
	}
	if first.status != 201 || again.status != 201 || string(first.body) != body || string(again.body) != body {
		t.Fatalf("answer %d %q, replay %d %q, want 201 %q", first.status, first.body, again.status, again.body, body)
	}
	for _, k := range []string{"Content-Disposition", "Content-Type"} {
		if a, b := first.header.Values(k), again.header.Values(k); fmt.Sprintf("%q", a) != fmt.Sprintf("%q", b) {
			t.Errorf("%s: answered %q, replayed %q", k, a, b)
		}
	}
	if got := again.header.Get("Content-Disposition"); got != disposition {
		t.Errorf("replayed Content-Disposition %q, want %q", got, disposition)
	}
}

// TestMiddlewareKeyIsAStructuredFieldString: a quoted Idempotency-Key is
// an RFC 8941 sf-string (draft-ietf-httpapi-idempotency-key-header): its
// escapes \" and \\ stand for " and \, so "a\"b" is the key a"b, the
// key sent bare. The backslash was kept: "a\"b" was the key a\"b, and a
// malformed quoted key (a stray quote or escape, an unterminated string,
// a character outside printable ASCII) was taken as a key of its own. It
// is a 400 problem now, and the handler does not run.
func TestMiddlewareKeyIsAStructuredFieldString(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := mwServer(t, nil, counting(&calls, 201, "made"))
	for i, c := range []struct{ quoted, bare string }{
		{`"a\"b"`, `a"b`},
		{`"c\\d"`, `c\d`},
		{`" spaced "`, ""},
		{`"\"e\""`, ""}, // the key "e", which only a quoted value can carry
	} {
		first := post(t, srv.URL+"/x", c.quoted, "")
		if first.status != 201 || calls.Load() != int64(i+1) {
			t.Fatalf("%s: %d %s, %d calls", c.quoted, first.status, first.body, calls.Load())
		}
		if c.bare == "" {
			continue
		}
		if r := post(t, srv.URL+"/x", c.bare, ""); r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != int64(i+1) {
			t.Errorf("%s then %s: %d %v, %d calls; want one key", c.quoted, c.bare, r.status, r.header, calls.Load())
		}
	}
	before := calls.Load()
	for _, k := range []string{`"a\x"`, `"a"b"`, `"abc`, `"abc\"`, `"a"; p=1`, `"a" "b"`, "\"a\tb\"", "\"caf\xc3\xa9\""} {
		r := post(t, srv.URL+"/x", k, "")
		expect(t, r, 400, "/problems/invalid-request")
		if m := r.json(t); !strings.Contains(fmt.Sprint(m["errors"]), "Idempotency-Key") {
			t.Errorf("%s: the problem does not name the header: %s", k, r.body)
		}
	}
	if calls.Load() != before {
		t.Fatalf("a malformed key ran the handler: %d calls", calls.Load()-before)
	}
}

// TestMiddlewareRefusesAnEmptyTenant: a Tenant func that returns "" (a
// request without the header it scopes by) gives a request with a key no
// scope: it is refused with a 400 problem and the handler does not run.
// It was kept under the tenant "", one scope shared by every such
// request, so a request of one caller replayed the stored answer of
// another's request with the same key. Requests without a key still pass.
func TestMiddlewareRefusesAnEmptyTenant(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	byHeader := func(r *http.Request) string { return r.Header.Get("X-Account") }
	srv := mwServer(t, &idemhttp.MiddlewareConfig{Tenant: byHeader}, counting(&calls, 201, "made"))
	for range 2 {
		r := post(t, srv.URL+"/x", "k", "")
		expect(t, r, 400, "/problems/invalid-request")
		if m := r.json(t); !strings.Contains(fmt.Sprint(m["detail"]), "tenant") {
			t.Errorf("the problem does not say what is missing: %s", r.body)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("a request without a tenant ran the handler %d times", calls.Load())
	}
	if r := post(t, srv.URL+"/x", "", ""); r.status != 201 || calls.Load() != 1 {
		t.Fatalf("a request without a key: %d, %d calls", r.status, calls.Load())
	}
	if r := post(t, srv.URL+"/x", "k", "", "X-Account", "acme"); r.status != 201 || calls.Load() != 2 {
		t.Fatalf("a request with a tenant: %d, %d calls", r.status, calls.Load())
	}
}

// TestMiddlewareMalformedQuotedKeyExplains: a key that starts with a
// double quote sent bare (as clients before the sf-string reading sent
// `"order-1`, or quoted once more by the older rule, `""order-1""`) is a
// 400 whose detail says why: a value that starts with '"' is read as an
// sf-string, and how to send such a key. It said only "a quoted key needs
// its closing quote" (or "must end at its closing quote"), about a key the
// caller never quoted.
func TestMiddlewareMalformedQuotedKeyExplains(t *testing.T) {
	t.Parallel()
	srv := mwServer(t, nil, counting(new(atomic.Int64), 201, "made"))
	for _, k := range []string{`"order-1`, `""order-1""`, `"a\b"`} {
		r := post(t, srv.URL+"/x", k, "")
		expect(t, r, 400, "/problems/invalid-request")
		m := r.json(t)
		text := fmt.Sprint(m["detail"], m["errors"])
		if !strings.Contains(text, "sf-string") || !strings.Contains(text, `"\"order-1"`) {
			t.Errorf("%s: the problem does not explain the sf-string form: %s", k, r.body)
		}
	}
}
