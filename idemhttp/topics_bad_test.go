package idemhttp_test

import (
	"net/url"
	"testing"
)

// TestTopicsBadInput: every refusal of the topic endpoints (subscriptions,
// the event log, replay) answers its problem and names its field, and
// none of them stores anything.
func TestTopicsBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	sub := "/v1/topics/orders/subscriptions/"
	hook := "http://127.0.0.1:9/hook"
	cases := []struct {
		name, method, path string
		body               any
		status             int
		typ, detail        string
	}{
		{"topic with a space", "PUT", "/v1/topics/" + url.PathEscape("or ders") + "/subscriptions/a", map[string]any{"url": hook}, 400,
			"/problems/invalid-request", "topic: must be printable ASCII without spaces"},
		{"name with a space", "PUT", sub + url.PathEscape("a b"), map[string]any{"url": hook}, 400,
			"/problems/invalid-request", "name: must be printable ASCII without spaces"},
		{"secret not whsec_", "PUT", sub + "a", map[string]any{"url": hook, "secret": "plain"}, 400,
			"/problems/invalid-request", "secret: want whsec_ followed by base64"},
		{"secret not base64", "PUT", sub + "a", map[string]any{"url": hook, "secret": "whsec_!!!"}, 400,
			"/problems/invalid-request", "secret: want whsec_ followed by base64"},
		{"secret too short", "PUT", sub + "a", map[string]any{"url": hook, "secret": "whsec_c2hvcnQ="}, 400,
			"/problems/invalid-request", "secret: want whsec_ followed by base64"},
		{"timeout not a duration", "PUT", sub + "a", map[string]any{"url": hook, "timeout": "soon"}, 400,
			"/problems/invalid-request", `timeout: "soon" is not a duration such as "30s", "168h" or "30" (seconds)`},
		{"negative timeout", "PUT", sub + "a", map[string]any{"url": hook, "timeout": "-1s"}, 400,
			"/problems/invalid-request", "timeout: must not be negative"},
		{"event type with a space", "PUT", sub + "a", map[string]any{"url": hook, "event_types": []string{"a b"}}, 400,
			"/problems/invalid-request", "event_types: must be printable ASCII without spaces"},
		{"subscription without a body", "PUT", sub + "a", nil, 400, "/problems/malformed-json", "a JSON body is required"},
		{"get with a bad name", "GET", sub + url.PathEscape("a b"), nil, 400,
			"/problems/invalid-request", "name: must be printable ASCII without spaces"},
		{"get of none", "GET", sub + "none", nil, 404, "/problems/not-found", ""},
		{"delete with a bad topic", "DELETE", "/v1/topics/" + url.PathEscape("a b") + "/subscriptions/a", nil, 400,
			"/problems/invalid-request", "topic: must be printable ASCII without spaces"},
		{"delete of none", "DELETE", sub + "none", nil, 404, "/problems/not-found", ""},
		{"list with a bad topic", "GET", "/v1/topics/" + url.PathEscape("a b") + "/subscriptions", nil, 400,
			"/problems/invalid-request", "topic: must be printable ASCII without spaces"},
		{"events limit 0", "GET", "/v1/topics/orders/events?limit=0", nil, 400,
			"/problems/invalid-request", "limit: must be an integer from 1 to 500"},
		{"events limit 501", "GET", "/v1/topics/orders/events?limit=501", nil, 400,
			"/problems/invalid-request", "limit: must be an integer from 1 to 500"},
		{"events cursor", "GET", "/v1/topics/orders/events?cursor=zz", nil, 400, "/problems/invalid-request", "cursor: malformed cursor"},
		{"replay with two metadata keys", "POST", "/v1/topics/orders/replay", map[string]any{"metadata": map[string]string{"a": "1", "b": "2"}}, 400,
			"/problems/invalid-request", "metadata: at most one key"},
		{"replay from not a time", "POST", "/v1/topics/orders/replay", map[string]any{"from": "yesterday"}, 400,
			"/problems/invalid-request", ""},
		{"replay without a body", "POST", "/v1/topics/orders/replay", nil, 400, "/problems/malformed-json", "a JSON body is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.req(c.method, c.path, e.keyA, c.body)
			expect(t, r, c.status, c.typ)
			if c.detail == "" {
				return
			}
			if d := r.json(t)["detail"]; d != c.detail {
				t.Fatalf("detail %q, want %q", d, c.detail)
			}
		})
	}
	r := e.req("GET", "/v1/topics/orders/subscriptions", e.keyA, nil)
	expect(t, r, 200, "")
	if subs := r.json(t)["subscriptions"].([]any); len(subs) != 0 {
		t.Fatalf("refused subscriptions were stored: %s", r.body)
	}
}
