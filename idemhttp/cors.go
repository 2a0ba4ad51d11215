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
	// AllowedHeaders are the request headers a browser may send; default
	// Authorization, Content-Type, Idempotency-Key, X-Idem-Tenant, X-Request-Id.
	AllowedHeaders []string
	// MaxAge is how long a browser caches a preflight; default 10 minutes.
	MaxAge time.Duration
}

// DefaultCORSMaxAge is the default CORSConfig.MaxAge.
const DefaultCORSMaxAge = 10 * time.Minute

func (c *CORSConfig) validate() error {
	for _, o := range c.AllowedOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return errors.New("cors origin " + strconv.Quote(o) + ": want * or scheme://host[:port]")
		}
	}
	if len(c.AllowedHeaders) == 0 {
		c.AllowedHeaders = []string{"Authorization", "Content-Type", "Idempotency-Key", headerTenant, headerRequestID}
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultCORSMaxAge
	}
	return nil
}

// cors wraps next with the CORS headers of c; a no-op when no origin is allowed.
func (c *CORSConfig) wrap(next http.Handler) http.Handler {
	if len(c.AllowedOrigins) == 0 {
		return next
	}
	any := slices.Contains(c.AllowedOrigins, "*")
	headers := strings.Join(c.AllowedHeaders, ", ")
	maxAge := strconv.Itoa(int(c.MaxAge.Seconds()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || (!any && !slices.Contains(c.AllowedOrigins, origin)) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "Location, Retry-After, Idempotent-Replayed, "+headerRequestID)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
			h.Set("Access-Control-Allow-Headers", headers)
			h.Set("Access-Control-Max-Age", maxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
