package idemhttp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzCheck fails on a 5xx, on a 4xx that is not a problem, on an
// invalid-request problem that names no field, and on a 2xx that is not
// valid UTF-8 JSON.
func fuzzCheck(t *testing.T, what string, r *resp) {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("%s: %d %s", what, r.status, r.body)
	}
	if r.status >= 400 {
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%s: %d without a problem (%q): %s", what, r.status, ct, r.body)
		}
		var p struct {
			Type   string            `json:"type"`
			Status int               `json:"status"`
			Detail string            `json:"detail"`
			Errors map[string]string `json:"errors"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || p.Status != r.status || p.Detail == "" {
			t.Fatalf("%s: %d with a broken problem (%v): %s", what, r.status, err, r.body)
		}
		if p.Type == "/problems/invalid-request" && len(p.Errors) == 0 {
			t.Fatalf("%s: an invalid request that names no field: %s", what, r.body)
		}
	}
	if r.status >= 200 && r.status < 300 && len(r.body) > 0 && (!utf8.Valid(r.body) || !json.Valid(r.body)) {
		t.Fatalf("%s: %d that is not valid UTF-8 JSON: %q", what, r.status, r.body)
	}
}

// writeCase is one write request of the body fuzzer and, for a write that
// replaces a resource, the path whose GET must not change when it is refused.
type writeCase struct {
	method, path string
	admin        bool
	key          string // an Idempotency-Key to send, "" = none
	readBack     string
}

var fuzzWrites = []writeCase{
	{method: "PUT", path: "/v1/targets/t1", admin: true, readBack: "/v1/targets/t1"},
	{method: "PUT", path: "/v1/topics/orders/subscriptions/s1", readBack: "/v1/topics/orders/subscriptions/s1"},
	{method: "PUT", path: "/v1/schedules/s1", readBack: "/v1/schedules/s1"},
	{method: "PUT", path: "/v1/limits/queue/q1", admin: true, readBack: "/v1/limits/queue/q1"},
	{method: "PUT", path: "/v1/limits/tenant/a?queue=q1", admin: true, readBack: "/v1/limits/tenant/a?queue=q1"},
	{method: "POST", path: "/v1/topics/orders/events"},
	{method: "POST", path: "/v1/topics/orders/replay", key: "rp-1"},
	{method: "POST", path: "/v1/schedules/s1/trigger"},
	{method: "POST", path: "/v1/batches"},
	{method: "POST", path: "/v1/batches/1/cancel", key: "bc-1"},
	{method: "POST", path: "/v1/dlq/1/resolve"},
	{method: "POST", path: "/v1/idempotency/k1/lease", key: "ls-1"},
	{method: "POST", path: "/v1/idempotency/k1/lease/renew"},
	{method: "POST", path: "/v1/idempotency/k1/lease/complete"},
	{method: "POST", path: "/v1/idempotency/k1/lease/release"},
	{method: "POST", path: "/v1/jobs/1/heartbeat"},
	{method: "POST", path: "/v1/jobs/1/complete"},
	{method: "POST", path: "/v1/queues/q1/pause", key: "qp-1"},
}

// seedWrites creates the resources that the writes of fuzzWrites replace.
func (e *env) seedWrites(t *testing.T) {
	t.Helper()
	for _, c := range []struct {
		path  string
		admin bool
		body  any
	}{
		{"/v1/targets/t1", true, map[string]any{"url": "http://127.0.0.1:9/hook", "queue": "hooks", "timeout": "5s"}},
		{"/v1/topics/orders/subscriptions/s1", false, map[string]any{"url": "http://127.0.0.1:9/hook", "event_types": []string{"paid"}}},
		{"/v1/schedules/s1", false, map[string]any{"every": "1h", "kind": "fire", "queue": "sq"}},
		{"/v1/limits/queue/q1", true, map[string]any{"rate": "1000/1m"}},
		{"/v1/limits/tenant/a?queue=q1", true, map[string]any{"concurrency": 1}},
	} {
		key := e.keyA
		if c.admin {
			key = e.admin
		}
		r := e.req("PUT", c.path, key, c.body)
		if r.status != 200 && r.status != 201 {
			t.Fatalf("seed %s: %d %s", c.path, r.status, r.body)
		}
	}
}

// FuzzWriteBodies drives the write endpoints not covered by
// FuzzDecodeEnqueue (targets, subscriptions, events, replays, schedules,
// limits, batches, the dead-letter resolve, result leases, heartbeats and
// completions) with arbitrary bodies: never a 5xx, every 4xx a problem, and
// a refused PUT leaves the resource it would replace unchanged.
func FuzzWriteBodies(f *testing.F) {
	for _, s := range []string{
		`{"url":"http://127.0.0.1:9/x","queue":"q","timeout":"1s","secrets":["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}`,
		`{"url":"http://127.0.0.1:9/x","event_types":["a","b"],"max_attempts":3,"secret":"whsec_!!"}`,
		`{"every":"1m","kind":"k","args":{"a":1},"dedup_window":"forever","cron":"* * * * *","timezone":"Mars/Base"}`,
		`{"cron":"61 * * * *","kind":"k"}`, `{"rate":"0/1s","concurrency":-1,"weight":1e400}`, `{"rate":"5/0s"}`,
		`{"partition_key":"p","payload":{"n":1},"type":"paid","metadata":{"a":"b"}}`, `{"payload":null}`,
		`{"from":"2020-01-01T00:00:00Z","to":"0000-01-01T00:00:00Z","subscription":"s1"}`,
		`{"jobs":[{"kind":"a"}],"on_finish":{"kind":"r","max_attempts":0}}`, `{"jobs":[]}`,
		`{"lease":"1m","holder":"h","lease_token":"x","result":{"a":1},"ttl":"1h"}`, `{"lease":"-1s"}`,
		`{"lease_token":"t","result":{"x":"\u0000"},"extend":"1h","progress":{"p":1}}`, `{"note":"fixed"}`,
		`{"reason":"x"}`, `{}`, `[]`, `"x"`, `{"url":"\u0000"}`, "{\"kind\":\"\xff\"}", `{"every":"1e400s"}`,
		`{"jobs":[{"kind":"a","depends_on":["x"]}]}`, `{"a":1,"a":2}`, `{"timeout":99999999999999999999}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if strings.TrimSpace(body) == "null" {
			// Known and not a crash: a JSON null body is taken as {} (or
			// refused as absent) where the document wants an object.
			return
		}
		e := fuzzEnv(t)
		e.seedWrites(t)
		for _, c := range fuzzWrites {
			key := e.keyA
			if c.admin {
				key = e.admin
			}
			var before *resp
			if c.readBack != "" {
				before = e.req("GET", c.readBack, key, nil)
				if before.status != 200 {
					t.Fatalf("GET %s: %d %s", c.readBack, before.status, before.body)
				}
			}
			var hdr []string
			if c.key != "" {
				hdr = []string{"Idempotency-Key", c.key}
			}
			r := e.req(c.method, c.path, key, body, hdr...)
			fuzzCheck(t, c.method+" "+c.path+" "+strconvQuote(body), r)
			if before != nil && r.status >= 400 {
				after := e.req("GET", c.readBack, key, nil)
				if after.status != 200 || !bytes.Equal(after.body, before.body) {
					t.Fatalf("refused %s %s (%d %s) changed it:\nbefore %s\nafter  %d %s", c.method, c.path, r.status, r.body,
						before.body, after.status, after.body)
				}
			}
		}
	})
}

func strconvQuote(s string) string {
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzPathSegment puts an arbitrary path segment (escaped as a client
// would) into every route with a name, topic, scope, key or id: never a
// 5xx, every 4xx a problem, and a name a PUT took reads back under the same
// path.
func FuzzPathSegment(f *testing.F) {
	for _, s := range []string{"a", ".", "..", "%", "\x00", "a\x00b", "\xff", "\xc3\x28", "a/b", "a b", "é", "~", "-1", "0",
		"18446744073709551616", "9223372036854775807", "1e3", " 1", strings.Repeat("n", 300), strings.Repeat("é", 200), "*", "_every",
		"default", "a?b", "a#b", "a;b", "%2e%2e", ".a", "a."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seg string) {
		e := fuzzEnv(t)
		p := url.PathEscape(seg)
		hook := map[string]any{"url": "http://127.0.0.1:9/hook"}
		lease := map[string]any{"lease": "1m"}
		cases := []struct {
			method, path string
			admin        bool
			body         any
			readBack     bool // a 2xx PUT must read back with GET
		}{
			{"PUT", "/v1/targets/" + p, true, map[string]any{"url": "http://127.0.0.1:9/hook", "queue": "hooks"}, true},
			{"GET", "/v1/targets/" + p, true, nil, false},
			{"DELETE", "/v1/targets/" + p, true, nil, false},
			{"PUT", "/v1/topics/" + p + "/subscriptions/" + p, false, hook, true},
			{"GET", "/v1/topics/" + p + "/subscriptions", false, nil, false},
			{"DELETE", "/v1/topics/" + p + "/subscriptions/" + p, false, nil, false},
			{"POST", "/v1/topics/" + p + "/events", false, map[string]any{"payload": map[string]any{}}, false},
			{"GET", "/v1/topics/" + p + "/events", false, nil, false},
			{"POST", "/v1/topics/" + p + "/replay", false, map[string]any{}, false},
			{"PUT", "/v1/schedules/" + p, false, map[string]any{"every": "1h", "kind": "k"}, true},
			{"POST", "/v1/schedules/" + p + "/trigger", false, map[string]any{}, false},
			{"DELETE", "/v1/schedules/" + p, false, nil, false},
			{"PUT", "/v1/limits/queue/" + p, true, map[string]any{"rate": "10/1s"}, true},
			{"PUT", "/v1/limits/" + p + "/x", true, map[string]any{"rate": "10/1s"}, true},
			{"GET", "/v1/limits/" + p + "/" + p, true, nil, false},
			{"DELETE", "/v1/limits/tenant/" + p, true, nil, false},
			{"GET", "/v1/batches/" + p, false, nil, false},
			{"POST", "/v1/batches/" + p + "/cancel", false, map[string]any{}, false},
			{"DELETE", "/v1/dlq/" + p, false, nil, false},
			{"POST", "/v1/dlq/" + p + "/resolve", false, map[string]any{}, false},
			{"GET", "/v1/idempotency/" + p, false, nil, false},
			{"DELETE", "/v1/idempotency/" + p, false, nil, false},
			{"POST", "/v1/idempotency/" + p + "/lease", false, lease, false},
			{"POST", "/v1/idempotency/" + p + "/lease/renew", false, map[string]any{"lease_token": "x", "lease": "1m"}, false},
			{"POST", "/v1/idempotency/" + p + "/lease/release", false, map[string]any{"lease_token": "x"}, false},
			{"GET", "/v1/jobs/" + p, false, nil, false},
			{"GET", "/v1/jobs/" + p + "/attempts", false, nil, false},
			{"POST", "/v1/jobs/" + p + "/cancel", false, map[string]any{}, false},
			{"POST", "/v1/jobs/" + p + "/heartbeat", false, map[string]any{"lease_token": "x"}, false},
			{"POST", "/v1/jobs/" + p + "/complete", false, map[string]any{"lease_token": "x"}, false},
			{"POST", "/v1/queues/" + p + "/pause", false, map[string]any{}, false},
			{"DELETE", "/v1/apikeys/" + p, true, nil, false},
		}
		for _, c := range cases {
			key := e.keyA
			if c.admin {
				key = e.admin
			}
			r := e.reqNoRedirect(c.method, c.path, key, c.body)
			what := c.method + " " + c.path
			if r.status >= 300 && r.status < 400 {
				t.Fatalf("%s: a redirect (%d) to %q", what, r.status, r.header.Get("Location"))
			}
			fuzzCheck(t, what, r)
			if c.readBack && r.status < 300 {
				g := e.reqNoRedirect("GET", c.path, key, nil)
				if g.status != 200 {
					t.Fatalf("%s took it (%d) but GET answers %d %s", what, r.status, g.status, g.body)
				}
			}
		}
	})
}

// reqNoRedirect is req without following redirects.
func (e *env) reqNoRedirect(method, path, key string, body any) *resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	r, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+key)
	c := *e.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &resp{status: res.StatusCode, header: res.Header, body: data}
}

// sendable reports whether a client can put query on a request line.
func sendable(query string) bool {
	if _, err := url.Parse("/v1/x?" + query); err != nil {
		return false
	}
	return !strings.ContainsAny(query, "#\x7f") && strings.IndexFunc(query, func(r rune) bool { return r < 0x21 || r > 0x7e }) < 0
}

// FuzzOtherQueries drives the query strings of the reads not covered by
// FuzzListQuery (topic events, stats, health, schedules, targets, limits,
// idempotency records, subscriptions, attempts) and of PUT /v1/limits
// (?queue=): never a 5xx, every 4xx a problem, a 200 valid JSON.
func FuzzOtherQueries(f *testing.F) {
	for _, s := range []string{"", "limit=0", "limit=501", "limit=1", "cursor=zz", "cursor=%00", "after=%FF", "since=x",
		"since=2020-01-01T00:00:00Z", "until=9999-12-31T23:59:59Z", "partition_key=a%00b", "type=%C3%28", "queue=%", "queue=", "limit=", "cursor=",
		"queue=a&queue=b", "kind=x&queue=q&window=1h", "window=-1s", "window=1e400h", "tenant=b", "tenant=_every", "scope=queue",
		"state=dead", "verbose=true", "key=%FF", "prefix=a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		if !sendable(query) {
			return // not a request line a client can send: nothing to test
		}
		e := fuzzEnv(t)
		for _, c := range []struct {
			path  string
			admin bool
		}{
			{"/v1/topics/orders/events", false}, {"/v1/stats", false}, {"/v1/stats", true}, {"/v1/health", false},
			{"/v1/health", true}, {"/v1/schedules", false}, {"/v1/targets", true}, {"/v1/limits", true},
			{"/v1/idempotency", false}, {"/v1/topics/orders/subscriptions", false}, {"/v1/jobs/1/attempts", false},
			{"/v1/batches/1", false}, {"/v1/limits/queue/q1", true},
		} {
			key := e.keyA
			if c.admin {
				key = e.admin
			}
			fuzzCheck(t, "GET "+c.path+"?"+query, e.req("GET", c.path+"?"+query, key, nil))
		}
		r := e.req("PUT", "/v1/limits/tenant/a?"+query, e.admin, map[string]any{"concurrency": 2})
		fuzzCheck(t, "PUT /v1/limits/tenant/a?"+query, r)
	})
}

// FuzzHeaders sends valid requests with arbitrary Idempotency-Key,
// Idem-Tenant and Content-Type headers: never a 5xx, every 4xx a problem.
func FuzzHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"k1", "", "application/json"}, {"", "b", "application/json; charset=utf-8"}, {" k ", "a", "text/plain"},
		{strings.Repeat("k", 300), strings.Repeat("t", 300), "application/problem+json"}, {"\xff", "\xff", "\xff"},
		{"k\x01", "t\x01", "application/json; charset=latin1"}, {"é", "é", "application/json;;"}, {"k", "_every", "multipart/form-data; boundary=x"},
		{"k", "default", "APPLICATION/JSON"}, {"k", " ", "application/x-www-form-urlencoded"}, {"\"k\"", "a b", "application/merge-patch+json"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, idemKey, tenant, ctype string) {
		e := fuzzEnv(t)
		for _, c := range []struct {
			method, path, body string
			admin              bool
		}{
			{"POST", "/v1/jobs", `{"kind":"k"}`, false},
			{"POST", "/v1/jobs", `{"kind":"k"}`, true},
			{"POST", "/v1/jobs/replay", `{"ids":["1"]}`, false},
			{"POST", "/v1/topics/orders/replay", `{}`, false},
			{"POST", "/v1/topics/orders/events", `{"payload":{}}`, true},
			{"POST", "/v1/idempotency/k1/lease", `{"lease":"1m"}`, false},
			{"PUT", "/v1/targets/t1", `{"url":"http://127.0.0.1:9/hook","queue":"q"}`, true},
			{"PUT", "/v1/schedules/s1", `{"every":"1h","kind":"k"}`, true},
			{"POST", "/v1/claim", `{"queues":["q"],"worker_id":"w"}`, true},
			{"GET", "/v1/stats", ``, true},
			{"GET", "/v1/health", ``, true},
		} {
			key := e.keyA
			if c.admin {
				key = e.admin
			}
			req, err := http.NewRequest(c.method, e.srv.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			for _, h := range [][2]string{{"Content-Type", ctype}, {"Idempotency-Key", idemKey}, {"Idem-Tenant", tenant}} {
				if strings.Trim(h[1], " \t") != "" { // an empty header is no header to the server
					req.Header.Set(h[0], h[1])
				}
			}
			res, err := e.srv.Client().Do(req)
			if err != nil {
				return // a header a client cannot send: nothing to test
			}
			data, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			fuzzCheck(t, c.method+" "+c.path+" "+strconvQuote(idemKey)+" "+strconvQuote(tenant)+" "+strconvQuote(ctype),
				&resp{status: res.StatusCode, header: res.Header, body: data})
		}
	})
}

// FuzzTokenBodies drives the bodies that need a live lease token (a job's
// complete, heartbeat and fail; a result lease's renew, complete and
// release): the fuzzed text follows the token in the object, so the
// input reaches the store. Never a 5xx, every 4xx a problem, a refused
// completion leaves the job running, and the job and the record read back
// as valid JSON.
func FuzzTokenBodies(f *testing.F) {
	for _, s := range []string{`"result":{"a":1}`, `"result":null`, `"result":"\u0000"`, `"result":1e400`, `"result":-0`,
		`"result":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, `"result":{"a":1,"a":2}`, `"lease":"1h"`,
		`"lease":"0s"`, `"error":"boom","retry":true,"retry_in":"1s"`, `"result_ttl":"-1s","duration_ms":-5`, `"result":"\ud800"`,
		`"result":123456789012345678901234567890`, `"lease_token":"other"`, `"result":{"":{"":""}}`, `"x":1`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		e := fuzzEnv(t)
		e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "fq"})
		j := e.claim(e.keyA, "fq")
		id, tok := j["id"].(string), j["lease_token"].(string)
		body := func(tok string) string { return `{"lease_token":` + strconvQuote(tok) + `,` + rest + `}` }
		for _, suffix := range []string{"/heartbeat", "/complete", "/fail"} {
			r := e.req("POST", "/v1/jobs/"+id+suffix, e.keyA, body(tok))
			fuzzCheck(t, "POST job"+suffix+" "+strconvQuote(rest), r)
			g := e.req("GET", "/v1/jobs/"+id, e.keyA, nil)
			fuzzCheck(t, "GET job after "+suffix, g)
			state := g.json(t)["state"]
			if r.status >= 400 && suffix != "/heartbeat" && state != "running" {
				t.Fatalf("refused %s (%d %s) left the job %v", suffix, r.status, r.body, state)
			}
			if r.status < 300 && suffix != "/heartbeat" {
				break
			}
		}
		a := e.req("POST", "/v1/idempotency/k1/lease", e.keyA, map[string]any{"lease": "1m"})
		fuzzCheck(t, "lease acquire", a)
		ltok, _ := a.json(t)["lease_token"].(string)
		for _, suffix := range []string{"/renew", "/complete", "/release"} {
			r := e.req("POST", "/v1/idempotency/k1/lease"+suffix, e.keyA, body(ltok))
			fuzzCheck(t, "POST lease"+suffix+" "+strconvQuote(rest), r)
			fuzzCheck(t, "GET record after "+suffix, e.req("GET", "/v1/idempotency/k1", e.keyA, nil))
		}
	})
}
