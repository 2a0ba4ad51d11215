package idemhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"
)

// headerRequestID carries the id of a request: honoured when the client
// sends a sane one, generated otherwise, and returned on every response.
const headerRequestID = "X-Request-Id"

// maxRequestIDLen bounds a client-chosen request id.
const maxRequestIDLen = 128

// requestInfo is what the server's handlers learn of a request, carried
// in its context as one value: the request id (withRequestID) and the
// caller, which the authentication fills in (authenticator.wrap) rather
// than deriving a second context and a second copy of the request.
type requestInfo struct {
	id string
	// principal is set once authenticated is.
	principal     principal
	authenticated bool
}

type requestInfoKey struct{}

// requestInfoOf returns the requestInfo of ctx (nil outside the Server).
func requestInfoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// RequestIDFromContext returns the request id of a request served by the
// Server ("" outside it).
func RequestIDFromContext(ctx context.Context) string {
	if info := requestInfoOf(ctx); info != nil {
		return info.id
	}
	return ""
}

// newRequestID returns 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var h [2 * len(b)]byte
	hex.Encode(h[:], b[:])
	return string(h[:]) // one allocation (hex.EncodeToString makes two)
}

// validRequestID accepts printable ASCII without spaces, up to maxRequestIDLen.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// withRequestID sets the request id on the response and the context, and
// writes one access-log line per request at info (debug for the ops
// endpoints, which probes call every few seconds).
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := headerValue(r.Header, headerRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		setHeader(w.Header(), headerRequestID, id)
		level := slog.LevelInfo
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			level = slog.LevelDebug
		}
		rid := r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, &requestInfo{id: id}))
		if !s.cfg.Logger.Enabled(r.Context(), level) {
			next.ServeHTTP(w, rid) // no access-log line: nothing to time or capture
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, rid)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.cfg.Logger.LogAttrs(r.Context(), level, "http request",
			slog.String("request_id", id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("duration", time.Since(start)),
			slog.String("remote", r.RemoteAddr))
	})
}

// outer wraps a mux in the handlers every response passes: request id and
// access log, the header limit, then CORS.
func (s *Server) outer(h http.Handler) http.Handler {
	return s.withRequestID(s.limitHeaders(s.cfg.CORS.wrap(h)))
}
