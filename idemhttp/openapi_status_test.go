package idemhttp_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemhttp"
)

// answers lists, per route, the statuses its handler answers beyond those
// every route of its kind answers (see TestOpenAPIStatusesPerRoute): its
// successes, a 404 for what its path names, a 409 for a wrong state or a
// lost lease (API.md).
var answers = map[string][]string{
	"POST /v1/jobs":                                  {"200", "201", "409", "422"},
	"POST /v1/jobs/batch":                            {"200"},
	"GET /v1/jobs":                                   {"200"},
	"GET /v1/jobs/{id}":                              {"200", "404"},
	"POST /v1/jobs/{id}/cancel":                      {"200", "404", "409"},
	"POST /v1/jobs/{id}/retry":                       {"200", "404", "409"},
	"GET /v1/jobs/{id}/attempts":                     {"200", "404"},
	"POST /v1/jobs/replay":                           {"200"},
	"GET /v1/dlq":                                    {"200"},
	"POST /v1/dlq/requeue":                           {"200", "404"},
	"DELETE /v1/dlq/{id}":                            {"204", "404"},
	"POST /v1/dlq/{id}/resolve":                      {"200", "404", "409"},
	"POST /v1/batches":                               {"200", "201", "404"},
	"GET /v1/batches/{id}":                           {"200", "404"},
	"POST /v1/batches/{id}/cancel":                   {"200", "404"},
	"POST /v1/claim":                                 {"200"},
	"POST /v1/jobs/{id}/heartbeat":                   {"200", "404", "409"},
	"POST /v1/jobs/{id}/complete":                    {"200", "404", "409"},
	"POST /v1/jobs/{id}/fail":                        {"200", "404", "409"},
	"GET /v1/idempotency":                            {"200"},
	"GET /v1/idempotency/{key}":                      {"200", "404"},
	"DELETE /v1/idempotency/{key}":                   {"204", "404", "409"}, // 409: a held key (API.md)
	"POST /v1/idempotency/{key}/lease":               {"200", "409"},
	"POST /v1/idempotency/{key}/lease/renew":         {"200", "409"},
	"POST /v1/idempotency/{key}/lease/complete":      {"200", "409"},
	"POST /v1/idempotency/{key}/lease/release":       {"204"},
	"GET /v1/schedules":                              {"200"},
	"GET /v1/schedules/{name}":                       {"200", "404"},
	"PUT /v1/schedules/{name}":                       {"200"},
	"DELETE /v1/schedules/{name}":                    {"204", "404"},
	"POST /v1/schedules/{name}/trigger":              {"200", "201", "404"},
	"GET /v1/stats":                                  {"200"},
	"GET /v1/health":                                 {"200", "503"},
	"GET /v1/targets":                                {"200"},
	"GET /v1/targets/{name}":                         {"200", "404"},
	"PUT /v1/targets/{name}":                         {"200", "201"},
	"DELETE /v1/targets/{name}":                      {"204", "404"},
	"POST /v1/topics/{topic}/events":                 {"200", "201"},
	"GET /v1/topics/{topic}/events":                  {"200"},
	"POST /v1/topics/{topic}/replay":                 {"200", "404"},
	"GET /v1/topics/{topic}/subscriptions":           {"200"},
	"GET /v1/topics/{topic}/subscriptions/{name}":    {"200", "404"},
	"PUT /v1/topics/{topic}/subscriptions/{name}":    {"200"},
	"DELETE /v1/topics/{topic}/subscriptions/{name}": {"204", "404"},
	"GET /v1/limits":                                 {"200"},
	"PUT /v1/limits/{scope}/{name}":                  {"200"},
	"GET /v1/limits/{scope}/{name}":                  {"200", "404"},
	"DELETE /v1/limits/{scope}/{name}":               {"204", "404"},
	"DELETE /v1/apikeys/{id}":                        {"204", "404"},
	"POST /v1/queues/{queue}/pause":                  {"200"},
	"POST /v1/queues/{queue}/resume":                 {"200"},
	"GET /v1/openapi.json":                           {"200"},
	"GET /healthz":                                   {"200"},
	"GET /readyz":                                    {"200", "503"},
	"GET /metrics":                                   {"200"},
}

// TestOpenAPIStatusesPerRoute walks the server's routes: the document
// declares, for each, every status the route answers — those of its
// handler (answers) and those of its kind: every route but the probes,
// /metrics and the document (which ignore their query) answers 400 (a
// query parameter it does not take, a query that does not parse); an API
// route behind a key also 401 and 403 (and 5xx, the default); one that reads a body
// (POST, PUT) 413 and 415; one behind the Idempotency-Key middleware 409
// (the first request still in flight) and 422 (the key reused for
// another request).
func TestOpenAPIStatusesPerRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	doc, _ := openAPISpec(t)
	kinds := idemhttp.RouteKinds(e.server)
	lenient := idemhttp.RouteAnyQuery(e.server)
	for _, route := range e.server.Routes() {
		want, ok := answers[route]
		if !ok {
			t.Errorf("%s: no entry in answers", route)
			continue
		}
		method, path, _ := strings.Cut(route, " ")
		want = slices.Clone(want)
		if !lenient[route] {
			want = append(want, "400")
		}
		if k := kinds[route]; k == "api" || k == "keyed" {
			want = append(want, "401", "403", "default")
			if method == "POST" || method == "PUT" {
				want = append(want, "413", "415")
			}
			if k == "keyed" {
				want = append(want, "409", "422")
			}
		}
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s: not in the document", route)
			continue
		}
		op := item.GetOperation(method)
		for _, status := range want {
			if op.Responses.Value(status) == nil {
				t.Errorf("%s (%s): status %s is not declared", route, op.OperationID, status)
			}
		}
	}
}
