package idemhttp

import (
	_ "embed" // the OpenAPI document
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 document of the API, served without an API
// key. Tests check that it lists exactly the registered routes and validate
// every request and response of the API tests against it
// (openapi_validate_test.go).
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document served at /v1/openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
	return nil
}
