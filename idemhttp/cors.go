package idemhttp

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CORSConfig configures cross-origin requests. With no AllowedOrigins
// (the default) no CORS header is ever sent and browsers on other
// origins cannot read the API.
type CORSConfig struct {
	// AllowedOrigins lists the origins allowed ("https://app.example");
	// "*" allows any origin (credentials are never allowed).
	AllowedOrigins []string
	// AllowedHeaders are the request headers a browser may send (header
	// names, or "*" for any: a preflight is then answered with the
	// headers it asks for, as browsers never let a literal "*" cover
	// Authorization); default DefaultCORSHeaders.
	AllowedHeaders []string
	// MaxAge is how long a browser caches a preflight; default 10 minutes.
	MaxAge time.Duration
}

// DefaultCORSMaxAge is the default CORSConfig.MaxAge.
const DefaultCORSMaxAge = 10 * time.Minute

// DefaultCORSHeaders returns the default CORSConfig.AllowedHeaders: the
// request headers of idem's API, and X-Client-Info and Apikey, which seed
// 004's browser clients send with every call (its functions allow
// "authorization, x-client-info, apikey, content-type").
func DefaultCORSHeaders() []string {
	return []string{"Authorization", "Content-Type", "Idempotency-Key", headerTenant, headerRequestID, "X-Client-Info", "Apikey"}
}

func (c *CORSConfig) validate() error {
	for _, o := range c.AllowedOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return errors.New("cors origin " + strconv.Quote(o) + ": want * or scheme://host[:port]")
		}
	}
	for _, h := range c.AllowedHeaders {
		if err := ValidCORSHeader(h); err != nil {
			return err
		}
	}
	if len(c.AllowedHeaders) == 0 {
		c.AllowedHeaders = DefaultCORSHeaders()
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultCORSMaxAge
	}
	return nil
}

// ValidCORSHeader checks one entry of CORSConfig.AllowedHeaders: a header
// name, or "*".
func ValidCORSHeader(h string) error {
	if !isToken(h) {
		return errors.New("cors header " + strconv.Quote(h) + ": want a header name (one per entry) or *")
	}
	return nil
}

// cors wraps next with the CORS headers of c; a no-op when no origin is allowed.
func (c *CORSConfig) wrap(next http.Handler) http.Handler {
	if len(c.AllowedOrigins) == 0 {
		return next
	}
	any := slices.Contains(c.AllowedOrigins, "*")
	anyHeader := slices.Contains(c.AllowedHeaders, "*")
	headers := strings.Join(c.AllowedHeaders, ", ")
	maxAge := strconv.Itoa(int(c.MaxAge.Seconds()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every answer varies with Origin, the ones without CORS headers
		// too: a shared cache must not give them to an allowed origin.
		h := w.Header()
		h.Add("Vary", "Origin")
		origin := headerValue(r.Header, "Origin")
		if origin == "" || (!any && !slices.Contains(c.AllowedOrigins, origin)) {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "Location, Retry-After, Idempotent-Replayed, "+headerRequestID)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
			if asked := r.Header.Get("Access-Control-Request-Headers"); anyHeader && asked != "" {
				// A literal "*" never covers Authorization, which every
				// call with an API key sends: allow what is asked.
				h.Add("Vary", "Access-Control-Request-Headers")
				h.Set("Access-Control-Allow-Headers", asked)
			} else {
				h.Set("Access-Control-Allow-Headers", headers)
			}
			h.Set("Access-Control-Max-Age", maxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isToken reports whether s is an HTTP token (RFC 9110 5.6.2), the form
// of a header name; "*" is one.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)
		if !ok {
			return false
		}
	}
	return true
}
