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
