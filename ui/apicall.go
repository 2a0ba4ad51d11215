package ui

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/idem-dev/idem/idemclient"
)

// inProcess is an http.RoundTripper that answers with the API handler
// itself: the dashboard's calls take the API's own code path (auth, tenant
// scoping, validation, Idempotency-Key) without a network hop.
type inProcess struct {
	api http.Handler
	// remote is the browser's address the call is made for ("" = none
	// known): the API's access log names it.
	remote string
}

// RoundTrip implements http.RoundTripper.
func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &recorder{header: http.Header{}}
	r := req.Clone(req.Context())
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = t.remote
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0"
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	t.api.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{StatusCode: rec.status, Status: http.StatusText(rec.status), Header: rec.header,
		Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// recorder is a minimal http.ResponseWriter that keeps the answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// client returns an API client acting with the session's key and tenant.
func (h *Handler) client(s *session) *idemclient.Client {
	cl, err := idemclient.New("http://idem.internal", &idemclient.Config{APIKey: s.key, Tenant: s.tenant,
		MaxRetries: -1, UserAgent: "idem-ui", HTTPClient: &http.Client{Transport: inProcess{api: h.api, remote: s.remote}}})
	if err != nil {
		panic("ui: constant base URL rejected: " + err.Error())
	}
	return cl
}

// problemText is the message of an API error as a user reads it.
func problemText(err error) string {
	var pe *idemclient.Error
	if errors.As(err, &pe) {
		if pe.Detail != "" {
			return pe.Detail
		}
		return pe.Title
	}
	return err.Error()
}

// filterRefused reports whether err is the API refusing a list's filter
// (400), which a page shows beside the filter form to fix; any other
// failure (an unknown key, a forbidden tenant, the database down) is not
// the filter's and gets an error page (apiError).
func filterRefused(err error) bool {
	return problemStatus(err) == http.StatusBadRequest
}

// problemStatus is the HTTP status a page answers for an API error: the
// API's own for a 4xx, 502 otherwise.
func problemStatus(err error) int {
	var pe *idemclient.Error
	if errors.As(err, &pe) && pe.Status >= 400 && pe.Status < 500 {
		return pe.Status
	}
	return http.StatusBadGateway
}
