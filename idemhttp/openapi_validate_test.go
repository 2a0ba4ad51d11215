package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/idem-dev/idem/idemhttp"
)

// The OpenAPI document is checked against the server on every request of
// the API tests: setup wraps the server in openAPIValidator, which fails the
// test when
//   - a request the server accepted (2xx) is invalid by the document (the
//     document is stricter than the server);
//   - a request valid by the document is refused with a 400 the document
//     cannot express (only the rules listed in docLooserThanServer may);
//   - a response does not match the document: its status is not declared
//     for the operation (only 5xx may fall to "default"), its body does not
//     match the schema, a declared required header is missing, or it
//     carries one of the API's own headers that the document does not
//     declare for that status.

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

func openAPISpec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(idemhttp.OpenAPI())
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(loader.Context); specErr != nil {
			return
		}
		specRouter, specErr = legacy.NewRouter(specDoc)
	})
	if specErr != nil {
		t.Fatalf("OpenAPI document: %v", specErr)
	}
	return specDoc, specRouter
}

// docLooserThanServer lists the 400s of the server on requests that are
// valid by the document: rules JSON Schema cannot state (cross-field,
// sizes in bytes, header/body agreement, repeated headers).
var docLooserThanServer = []string{
	"differs from the Idempotency-Key header",
	"send one Idempotency-Key header",
	"must be valid JSON of at most",
	"must be a JSON object of at most",
	"result_ttl: must be positive",
	"dedup_window must be >= 0 and result_ttl > 0",
	"the dead-letter queue holds dead jobs only",
	"only with scope tenant",         // ?queue= with the path's scope queue
	"must be between 1s and",         // lease bounds (a duration pattern has no range)
	"must be between 0s and",         // wait bounds
	"only a tenant has a weight",     // path scope × body field
	"has no weight",                  // tenant "*" (a path value) × body field
	"is reserved for default limits", // "*" as a tenant: the document's names have no pattern
	"lease: must be at least 1s",
	"unexpected data after the JSON value",    // JSON Schema sees one value
	"malformed cursor",                        // a cursor is opaque
	"depends_on: job",                         // a dependency that does not exist in the tenant
	"is the target of a subscription",         // a job's delivery_target naming a stored subscription
	"reserved for the delivery jobs of topic", // a job's kind "topic:…" (TopicKindPrefix)
	"no longer exists; it did not complete",   // a retry of a job that never ran, its dependency deleted
	"key: must be printable ASCII",            // kin-openapi checks path values still escaped
	"forbidden target address",                // a target URL's resolved address (SSRF policy)
	"webhook: invalid target url",             // a URL's syntax (the document says string)
	"want nats://host:port/subject",           // a NATS URL's syntax: one server, a subject
	"want whsec_ followed by base64",          // a secret's base64 and its 16-byte minimum
	"a batch needs a key",                     // the key may come in the body or the header
	// Retry policies and completion jobs: cross-field rules, and a
	// duration pattern that cannot say "positive".
	"must not be below retry.base", "differs from max_attempts", "differs from event_types", "an explicit schedule replaces them",
	"retry.base: must be positive", "retry.max: must be positive",
	"not allowed: the batch key", "not allowed: the completion job", `"idem_batch_id" is set by idem`,
	// Schedules: cron syntax, zone names, interval bounds and the grain
	// against the timetable are beyond JSON Schema.
	"cron: ", "timezone: ", "every: must be", "grain: ", "dedup_window: must be at least",
	"must be valid JSON (at most",               // strict JSON: UTF-8, no duplicate names, double range, depth
	"must be JSON of at most",                   // a value's size in bytes (args, metadata, result)
	"duplicate member name",                     // JSON Schema sees decoded objects (the last member wins)
	"the body is not valid UTF-8",               // JSON Schema sees decoded strings
	"must be valid UTF-8 without NUL",           // query values
	"must be printable ASCII",                   // names and keys (no pattern in the document)
	"must not contain NUL bytes",                // free text
	"must be valid UTF-8",                       // free text
	"malformed query string",                    // url.Values drops what the document never sees
	"printable ASCII characters",                // a path value is checked escaped (%00 looks printable)
	"must not contain '/'",                      // a path value is checked escaped (%2F has no '/')
	"holds the NUL character",                   // \u0000 anywhere in a payload or metadata value
	"outside the years 0000 to 9999",            // a date-time whose offset moves it out of range in UTC
	"a path segment must not be empty",          // "." and ".." segments: the HTTP layer's, not the document's
	"period must be a duration of at least 1ms", // a rate's period (the pattern cannot say positive)
	"or a duration of at least 1ms",             // a target's timeout: 0 or at least 1ms (the pattern cannot say it)
	"given more than once",                      // a one-value query parameter repeated (the document sees the first)
	"an empty item in the list",                 // a list parameter repeated with an empty value (state=dead&state=)
}

// ownHeaders are the response headers of the API that the document must
// declare wherever they are sent.
var ownHeaders = []string{"Location", "Idempotent-Replayed", "Retry-After", "WWW-Authenticate"}

// openAPIValidator checks every exchange through next against the document.
func openAPIValidator(t *testing.T, next http.Handler) http.Handler {
	_, router := openAPISpec(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request body: %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		check := r.Clone(context.WithoutCancel(r.Context()))
		cw := &captureResponse{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if cw.status == 0 {
			cw.status = http.StatusOK
		}
		if err := checkExchange(router, check, body, cw); err != nil {
			t.Errorf("OpenAPI: %s %s → %d: %v\nrequest:  %s\nresponse: %s", check.Method, check.URL.RequestURI(),
				cw.status, err, truncate(body), truncate(cw.body.Bytes()))
		}
	})
}

func truncate(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// captureResponse passes the response through and keeps a copy.
type captureResponse struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
}

func (c *captureResponse) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
		c.header = c.ResponseWriter.Header().Clone()
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *captureResponse) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

func (c *captureResponse) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

var errNoBearer = errors.New("no bearer API key")

func authBearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != "" {
		return nil
	}
	return errNoBearer
}

func checkExchange(router routers.Router, r *http.Request, reqBody []byte, cw *captureResponse) error {
	ctx := context.Background()
	if len(bytes.TrimSpace(reqBody)) == 0 {
		reqBody = nil // the server reads a body of white space as none
	}
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		// A CORS preflight is answered by the CORS layer in front of the
		// routes: it is no operation of the API.
		return nil
	}
	route, params, err := router.FindRoute(r)
	if err != nil {
		// Unknown paths and methods are the mux's 404 and 405 problems.
		if cw.status == http.StatusNotFound || cw.status == http.StatusMethodNotAllowed {
			return nil
		}
		return fmt.Errorf("no documented operation: %v", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: authBearer, MultiError: true}}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr == nil {
		reqErr = undeclaredQuery(route, r)
	}
	status := cw.status
	switch {
	case status < 300 && reqErr != nil && !batchItemErrors(route, cw):
		return fmt.Errorf("the server accepted a request the document rejects: %v", reqErr)
	case status == http.StatusBadRequest && reqErr == nil:
		var p struct{ Detail string }
		_ = json.Unmarshal(cw.body.Bytes(), &p)
		if !containsAny(p.Detail, docLooserThanServer) {
			return fmt.Errorf("the server refused (400) a request the document accepts: %s", p.Detail)
		}
	}
	op := route.Operation
	code := strconv.Itoa(status)
	declared := op.Responses.Value(code)
	if declared == nil && status < 500 {
		return fmt.Errorf("status %d is not declared for %s", status, op.OperationID)
	}
	if declared == nil {
		declared = op.Responses.Default()
	}
	for _, h := range ownHeaders {
		if cw.header.Get(h) == "" {
			continue
		}
		if declared == nil || declared.Value == nil || declared.Value.Headers[h] == nil {
			return fmt.Errorf("header %s is sent but not declared for %s %d", h, op.OperationID, status)
		}
	}
	// ValidateResponse wants a request input; the request may be invalid
	// (the test sent it on purpose), so validate against a copy without checks.
	rin := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: rin, Status: status, Header: cw.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(cw.body.Bytes())
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("response does not match the document: %v", err)
	}
	// Every time of the API has microseconds (TestLeaseTimesInMicroseconds).
	for _, m := range apiTime.FindAllSubmatch(cw.body.Bytes(), -1) {
		if len(m[1]) > 1+6 {
			return fmt.Errorf("the time %s has more than microseconds", m[0])
		}
	}
	return nil
}

// batchItemErrors tells whether a batch answer holds item errors: the
// server answers 200 for a batch with invalid items, each failing alone.
func batchItemErrors(route *routers.Route, cw *captureResponse) bool {
	if route.Operation.OperationID != "enqueueBatch" {
		return false
	}
	var reply struct {
		Results []struct {
			Error json.RawMessage `json:"error"`
		} `json:"results"`
	}
	if json.Unmarshal(cw.body.Bytes(), &reply) != nil {
		return false
	}
	for _, r := range reply.Results {
		if len(r.Error) > 0 {
			return true
		}
	}
	return false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// undeclaredQuery refuses a query parameter the operation does not
// declare: JSON Schema cannot say so, the server refuses it (400), and no
// request the server accepts may carry one.
func undeclaredQuery(route *routers.Route, r *http.Request) error {
	if anyQuery, _ := route.Operation.Extensions["x-idem-any-query"].(bool); anyQuery {
		return nil // the operation ignores its query (probes, scrapes, the document)
	}
	declared := queryParameters(route.PathItem, route.Operation)
	for name := range r.URL.Query() {
		if !slices.Contains(declared, name) {
			return fmt.Errorf("query parameter %q is not declared", name)
		}
	}
	return nil
}
