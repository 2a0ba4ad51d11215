package idemhttp_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idem-dev/idem/idemhttp"
)

// TestQueryUnknownParameterRefused: a query parameter a route does not
// take is a 400 naming it, as an unknown JSON field is, and changes
// nothing. A typo in a filter (?stat=dead) listed every job; on a bulk
// route (POST /v1/dlq/requeue?queu=x) the query was ignored and the body's
// filter alone acted.
func TestQueryUnknownParameterRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	dead := e.dead(e.keyA, "q")
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "other"})
	cases := []problemCase{
		{name: "list typo", method: "GET", path: "/v1/jobs?stat=dead", status: 400, typ: "/problems/invalid-request", field: "stat"},
		{name: "dlq typo", method: "GET", path: "/v1/dlq?queu=q", status: 400, typ: "/problems/invalid-request", field: "queu"},
		{name: "flag without value", method: "GET", path: "/v1/jobs?verbose", status: 400, typ: "/problems/invalid-request", field: "verbose"},
		{name: "known and unknown", method: "GET", path: "/v1/jobs?state=dead&Queue=q", status: 400, typ: "/problems/invalid-request", field: "Queue"},
		{name: "events", method: "GET", path: "/v1/topics/t/events?types=a", status: 400, typ: "/problems/invalid-request", field: "types"},
		{name: "record", method: "GET", path: "/v1/idempotency/k?include_result=true", status: 400, typ: "/problems/invalid-request", field: "include_result"},
		{name: "queue limit with a queue", method: "GET", path: "/v1/limits/queue/q?queue=r", status: 400, typ: "/problems/invalid-request", field: "queue"},
		{name: "requeue", method: "POST", path: "/v1/dlq/requeue?queu=x", body: map[string]any{"filter": map[string]any{}},
			status: 400, typ: "/problems/invalid-request", field: "queu"},
		{name: "replay", method: "POST", path: "/v1/jobs/replay?queue=x", body: map[string]any{"filter": map[string]any{}},
			status: 400, typ: "/problems/invalid-request", field: "queue"},
		{name: "cancel", method: "POST", path: "/v1/jobs/" + dead + "/retry?run_at=2030-01-01T00:00:00Z",
			status: 400, typ: "/problems/invalid-request", field: "run_at"},
	}
	e.checkProblems(t, cases)
	if r := e.req("GET", "/v1/jobs/"+dead, e.keyA, nil); r.json(t)["state"] != "dead" {
		t.Fatalf("the dead job moved: %s", r.body)
	}
	if n := e.countJobs(); n != 2 {
		t.Fatalf("%d jobs, want the 2 enqueued (nothing replayed)", n)
	}
	r := e.req("GET", "/v1/jobs?stat=dead", e.keyA, nil)
	if d, _ := r.json(t)["detail"].(string); !strings.Contains(d, "unknown query parameter") || !strings.Contains(d, "state") {
		t.Fatalf("detail %q: want the parameter named unknown and the ones the route takes", d)
	}
}

// TestQueryUnknownParameterEveryRoute walks the router: every API route
// answers a parameter it does not take with a 400 naming it, before its
// handler runs; the probes, /metrics and the document ignore their query
// (a scraper's or a cache buster's parameter does not fail them).
func TestQueryUnknownParameterEveryRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	lenient := idemhttp.RouteAnyQuery(e.server)
	for _, want := range []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /v1/openapi.json"} {
		if !lenient[want] {
			t.Errorf("%s checks its query", want)
		}
	}
	for _, route := range e.server.Routes() {
		method, pattern, _ := strings.Cut(route, " ")
		r := e.req(method, concretePath(pattern)+"?no_such_parameter=1", e.admin, nil)
		if lenient[route] {
			if r.status != 200 {
				t.Errorf("%s with an unknown parameter: status %d, want 200: %s", route, r.status, r.body)
			}
			continue
		}
		if r.status != 400 {
			t.Errorf("%s: status %d, want 400: %s", route, r.status, r.body)
			continue
		}
		if errs, _ := r.json(t)["errors"].(map[string]any); errs["no_such_parameter"] == nil || len(errs) != 1 {
			t.Errorf("%s: errors %v, want one for no_such_parameter", route, errs)
		}
	}
	if n := e.countJobs(); n != 0 {
		t.Fatalf("%d jobs, want none", n)
	}
}

// TestOpenAPIQueryParametersPerRoute walks the router: the query
// parameters the document declares for each route are exactly those the
// route takes, so that neither list drifts from the other.
func TestOpenAPIQueryParametersPerRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	doc, _ := openAPISpec(t)
	taken := idemhttp.RouteQuery(e.server)
	for _, route := range e.server.Routes() {
		method, path, _ := strings.Cut(route, " ")
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s: not in the document", route)
			continue
		}
		declared := queryParameters(item, item.GetOperation(method))
		want := slices.Sorted(slices.Values(taken[route]))
		if !slices.Equal(declared, want) {
			t.Errorf("%s: the document declares %v, the route takes %v", route, declared, want)
		}
	}
}

// queryParameters returns the sorted names of the query parameters of op
// (its own and its path's).
func queryParameters(item *openapi3.PathItem, op *openapi3.Operation) []string {
	var out []string
	for _, ps := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, p := range ps {
			if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
				out = append(out, p.Value.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}
