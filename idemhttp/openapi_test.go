package idemhttp_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemhttp"
)

// TestOpenAPIMatchesRoutes: every route is documented and every documented
// operation is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(idemhttp.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	routes := e.server.Routes()
	slices.Sort(documented)
	slices.Sort(routes)
	if !slices.Equal(documented, routes) {
		t.Fatalf("routes and OpenAPI differ:\nroutes:     %v\ndocumented: %v", routes, documented)
	}
}

// TestOpenAPIServedWithoutKey: the document needs no API key.
func TestOpenAPIServedWithoutKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	r := e.req("GET", "/v1/openapi.json", "", nil)
	expect(t, r, 200, "")
	if string(r.body) != string(idemhttp.OpenAPI()) {
		t.Fatal("served document differs from OpenAPI()")
	}
}

// TestOpenAPIOperations: every API operation has a tag, declares
// Idem-Tenant and its errors, and every POST its 413 and 415.
func TestOpenAPIOperations(t *testing.T) {
	t.Parallel()
	doc, _ := openAPISpec(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if len(op.Tags) == 0 || op.OperationID == "" || op.Summary == "" {
				t.Errorf("%s: tags, operationId and summary are required", name)
			}
			public := op.Security != nil && len(*op.Security) == 0
			if public {
				continue
			}
			if op.Parameters.GetByInAndName("header", "Idem-Tenant") == nil {
				t.Errorf("%s: no Idem-Tenant parameter", name)
			}
			want := []string{"400", "401", "403", "default"}
			if method == "POST" {
				want = append(want, "413", "415")
			}
			for _, s := range want {
				if op.Responses.Value(s) == nil {
					t.Errorf("%s: no %s response", name, s)
				}
			}
		}
	}
}

// TestZeroIsNotDefault: an explicit 0 for max_attempts or the claim limit
// is out of range (400), not the default.
func TestZeroIsNotDefault(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "max_attempts": 0})
	expect(t, r, 400, "/problems/invalid-request")
	if r.json(t)["errors"].(map[string]any)["max_attempts"] == nil {
		t.Fatalf("no max_attempts error: %s", r.body)
	}
	r = e.req("POST", "/v1/jobs/batch", e.keyA, map[string]any{"jobs": []any{
		map[string]any{"kind": "k", "max_attempts": 0}, map[string]any{"kind": "k"}}})
	expect(t, r, 200, "")
	res := r.json(t)["results"].([]any)
	if res[0].(map[string]any)["error"] == nil || res[1].(map[string]any)["job"] == nil {
		t.Fatalf("batch: %s", r.body)
	}
	for field, body := range map[string]map[string]any{
		"jobs[1].max_attempts": {"key": "b0", "jobs": []any{map[string]any{"kind": "k"},
			map[string]any{"kind": "k", "args": map[string]any{"n": 2}, "max_attempts": 0}}},
		"on_finish.max_attempts": {"key": "b1", "jobs": []any{map[string]any{"kind": "k"}},
			"on_finish": map[string]any{"kind": "report", "max_attempts": 0}},
	} {
		r = e.req("POST", "/v1/batches", e.keyA, body)
		expect(t, r, 400, "/problems/invalid-request")
		if r.json(t)["errors"].(map[string]any)[field] == nil {
			t.Fatalf("batch: no %s error: %s", field, r.body)
		}
	}
	r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"default"}, "worker_id": "w", "limit": 0})
	expect(t, r, 400, "/problems/invalid-request")
	r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"default"}, "worker_id": "w"})
	expect(t, r, 200, "")
	if jobs := r.json(t)["jobs"].([]any); len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1 (default limit)", len(jobs))
	}
	r = e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k"})
	expect(t, r, 201, "")
	if m := r.job(t)["max_attempts"]; m != float64(5) {
		t.Fatalf("max_attempts %v, want default 5", m)
	}
}
