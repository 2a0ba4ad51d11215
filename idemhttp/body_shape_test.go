package idemhttp_test

import (
	"strings"
	"testing"
)

// bodyMember is, per route that takes a body, one member it knows ("" for
// a route whose body has no members): the duplicate-name case repeats it.
var bodyMember = map[string]string{
	"POST /v1/jobs":                               `"kind":"k"`,
	"POST /v1/jobs/batch":                         `"jobs":[]`,
	"POST /v1/jobs/{id}/cancel":                   "",
	"POST /v1/jobs/{id}/retry":                    `"run_at":"2030-01-01T00:00:00Z"`,
	"POST /v1/jobs/replay":                        `"queue":"q"`,
	"POST /v1/dlq/requeue":                        `"ids":[]`,
	"POST /v1/dlq/{id}/resolve":                   `"note":"n"`,
	"POST /v1/batches":                            `"key":"b"`,
	"POST /v1/batches/{id}/cancel":                "",
	"POST /v1/claim":                              `"worker_id":"w"`,
	"POST /v1/jobs/{id}/heartbeat":                `"lease_token":"t"`,
	"POST /v1/jobs/{id}/complete":                 `"lease_token":"t"`,
	"POST /v1/jobs/{id}/fail":                     `"lease_token":"t"`,
	"POST /v1/idempotency/{key}/lease":            `"lease":"30s"`,
	"POST /v1/idempotency/{key}/lease/renew":      `"lease_token":"t"`,
	"POST /v1/idempotency/{key}/lease/complete":   `"lease_token":"t"`,
	"POST /v1/idempotency/{key}/lease/release":    `"lease_token":"t"`,
	"PUT /v1/schedules/{name}":                    `"kind":"k"`,
	"POST /v1/schedules/{name}/trigger":           `"key":"k"`,
	"PUT /v1/targets/{name}":                      `"url":"https://example.com/"`,
	"POST /v1/topics/{topic}/events":              `"key":"k"`,
	"POST /v1/topics/{topic}/replay":              `"partition_key":"p"`,
	"PUT /v1/topics/{topic}/subscriptions/{name}": `"url":"https://example.com/"`,
	"PUT /v1/limits/{scope}/{name}":               `"concurrency":1`,
	"POST /v1/queues/{queue}/pause":               `"tenant":"a"`,
	"POST /v1/queues/{queue}/resume":              `"tenant":"a"`,
}

// concretePath fills the path values of a route pattern.
func concretePath(pattern string) string {
	return strings.NewReplacer("{id}", "1", "{key}", "k", "{name}", "n", "{topic}", "t",
		"{queue}", "q", "{scope}", "queue").Replace(pattern)
}

// TestBodyMustBeOneObject walks every POST and PUT route: a body that is
// not one JSON object — null (which encoding/json takes as {}: a topic
// replay of null replayed every event), an array, a bare string or number,
// an object followed by more data, or an object repeating a member — is a
// 400 problem (naming body where the shape is wrong) and writes nothing,
// whether the route's body is required or optional.
func TestBodyMustBeOneObject(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	e.enqueue(e.keyA, map[string]any{"kind": "k"})
	r := e.req("POST", "/v1/topics/t/events", e.admin, map[string]any{"key": "e1", "payload": map[string]any{}})
	expect(t, r, 201, "")
	shapes := []struct{ name, body, field string }{
		{"null", `null`, "body"},
		{"null with spaces", " \n null \t", "body"},
		{"array", `[]`, "body"},
		{"array of an object", `[{}]`, "body"},
		{"string", `"x"`, "body"},
		{"number", `1`, "body"},
		{"boolean", `true`, "body"},
		{"trailing object", `{} {}`, ""},
		{"trailing null", `{}null`, ""},
	}
	for _, route := range e.server.Routes() {
		method, pattern, _ := strings.Cut(route, " ")
		if method != "POST" && method != "PUT" {
			continue
		}
		member, ok := bodyMember[route]
		if !ok {
			t.Errorf("%s: no case in bodyMember", route)
			continue
		}
		path := concretePath(pattern)
		t.Run(route, func(t *testing.T) {
			for _, s := range shapes {
				r := e.req(method, path, e.admin, s.body)
				if r.status != 400 {
					t.Errorf("%s: status %d, want 400: %s", s.name, r.status, r.body)
					continue
				}
				if s.field == "" {
					continue
				}
				if errs, _ := r.json(t)["errors"].(map[string]any); errs[s.field] == nil || len(errs) != 1 {
					t.Errorf("%s: errors %v, want one for %s: %s", s.name, errs, s.field, r.body)
				}
			}
			if member == "" {
				return
			}
			r := e.req(method, path, e.admin, "{"+member+","+member+"}")
			if d, _ := r.json(t)["detail"].(string); r.status != 400 || !strings.HasSuffix(d, "duplicate member name") {
				t.Errorf("duplicate member: status %d, want 400 duplicate member name: %s", r.status, r.body)
			}
		})
	}
	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs, want only the one enqueued", n)
	}
	r = e.req("GET", "/v1/topics/t/events", e.admin, nil)
	expect(t, r, 200, "")
	if evs := r.json(t)["events"].([]any); len(evs) != 1 {
		t.Fatalf("%d events, want 1: %s", len(evs), r.body)
	}
}

// TestNullObjectMember: a member whose value must be an object given as
// null is refused naming it, not taken as {} (a job replay of
// {"filter": null} selected every job of the tenant), and so is a batch
// job given as null.
func TestNullObjectMember(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	e.enqueue(e.keyA, map[string]any{"kind": "k"})
	e.checkProblems(t, []problemCase{
		{name: "replay filter", method: "POST", path: "/v1/jobs/replay", body: `{"filter":null}`,
			status: 400, typ: "/problems/invalid-request", field: "filter"},
		{name: "batch job", method: "POST", path: "/v1/batches", body: `{"key":"b","jobs":[{"kind":"k"},null]}`,
			status: 400, typ: "/problems/invalid-request", field: "jobs[1]"},
	})
	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs, want only the one enqueued", n)
	}
}

// TestFilterStateEmptyItem: a body filter's state with an empty item
// ("", "dead,", ["dead", ""]) is a 400 naming filter.state, as the
// list query's state= is: the empty items were dropped, so a replay with
// "state": "" copied the jobs of every state.
func TestFilterStateEmptyItem(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	e.enqueue(e.keyA, map[string]any{"kind": "k"})
	var cases []problemCase
	for _, state := range []string{`""`, `"dead,"`, `",dead"`, `["dead",""]`, `[" "]`, `[]`} {
		cases = append(cases,
			problemCase{name: "replay " + state, method: "POST", path: "/v1/jobs/replay",
				body: `{"filter":{"state":` + state + `}}`, status: 400, typ: "/problems/invalid-request", field: "filter.state"},
			problemCase{name: "requeue " + state, method: "POST", path: "/v1/dlq/requeue",
				body: `{"filter":{"state":` + state + `}}`, status: 400, typ: "/problems/invalid-request", field: "filter.state"})
	}
	e.checkProblems(t, cases)
	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs, want only the one enqueued", n)
	}
	r := e.req("POST", "/v1/jobs/replay", e.keyA, `{"filter":{"state":"completed,dead"}}`)
	expect(t, r, 200, "")
}
