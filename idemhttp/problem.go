package idemhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// Problem types: stable URI references, one per kind of error.
const (
	ProblemInvalid            = "/problems/invalid-request"
	ProblemMalformedJSON      = "/problems/malformed-json"
	ProblemUnauthorized       = "/problems/unauthorized"
	ProblemForbidden          = "/problems/forbidden"
	ProblemNotFound           = "/problems/not-found"
	ProblemMethodNotAllowed   = "/problems/method-not-allowed"
	ProblemWrongState         = "/problems/wrong-state"
	ProblemLeaseLost          = "/problems/lease-lost"
	ProblemKeyInProgress      = "/problems/idempotency-key-in-progress"
	ProblemConflict           = "/problems/conflict"
	ProblemKeyReused          = "/problems/idempotency-key-reused"
	ProblemKeyMissing         = "/problems/idempotency-key-missing"
	ProblemPayloadTooLarge    = "/problems/payload-too-large"
	ProblemUnsupportedMedia   = "/problems/unsupported-media-type"
	ProblemInternal           = "/problems/internal"
	ProblemServiceUnavailable = "/problems/service-unavailable"
	problemContentType        = "application/problem+json"
	headerIdempotentReplayed  = "Idempotent-Replayed"
	headerIdempotencyKey      = "Idempotency-Key"
	headerTenant              = "Idem-Tenant"
	// retryAfterUnavailable is the Retry-After (seconds) of a 503.
	retryAfterUnavailable = "5"
)

// Problem is an RFC 9457 problem detail, the body of every error reply;
// handlers return a *Problem as an error.
type Problem = wire.Problem

func newProblem(status int, typ, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

// invalid returns a 400 validation problem for one field.
func invalid(field, msg string) *Problem {
	p := newProblem(http.StatusBadRequest, ProblemInvalid, "Invalid request", field+": "+msg)
	p.Errors = map[string]string{field: msg}
	return p
}

// problemFor maps an error to its problem: the one place where domain
// errors become HTTP statuses.
func problemFor(err error) *Problem {
	var p *Problem
	var inv *idemtype.InvalidError
	var reused *idemtype.KeyReusedError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &tooBig):
		return newProblem(http.StatusRequestEntityTooLarge, ProblemPayloadTooLarge, "Payload too large",
			fmt.Sprintf("the request body is over %d bytes (the body limit: http.max_body_bytes of idem serve)", tooBig.Limit))
	case errors.As(err, &inv):
		return invalid(inv.Field, inv.Reason)
	case errors.Is(err, idemtype.ErrInvalid):
		return newProblem(http.StatusBadRequest, ProblemInvalid, "Invalid request", err.Error())
	case errors.Is(err, idemtype.ErrNotFound):
		return newProblem(http.StatusNotFound, ProblemNotFound, "Not found", err.Error())
	case errors.As(err, &reused):
		p := newProblem(http.StatusUnprocessableEntity, ProblemKeyReused, "Idempotency key reused",
			"the idempotency key was used with a different request")
		if reused.JobID != 0 {
			p.JobID = formatID(reused.JobID)
		}
		return p
	case errors.Is(err, idemtype.ErrKeyReused):
		return newProblem(http.StatusUnprocessableEntity, ProblemKeyReused, "Idempotency key reused", err.Error())
	case errors.Is(err, idemtype.ErrWrongState):
		return newProblem(http.StatusConflict, ProblemWrongState, "Wrong state", err.Error())
	case errors.Is(err, idemtype.ErrLeaseLost):
		return newProblem(http.StatusConflict, ProblemLeaseLost, "Lease lost", err.Error())
	case errors.Is(err, idemtype.ErrKeyInProgress):
		return newProblem(http.StatusConflict, ProblemKeyInProgress, "Idempotency key in progress", err.Error())
	case errors.Is(err, idemtype.ErrConflict):
		return newProblem(http.StatusConflict, ProblemConflict, "Concurrent change", err.Error())
	case errors.Is(err, idemtype.ErrUnavailable):
		return newProblem(http.StatusServiceUnavailable, ProblemServiceUnavailable, "Storage unavailable",
			"the storage cannot be reached or written at the moment; retry later")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return newProblem(http.StatusServiceUnavailable, ProblemServiceUnavailable, "Request cancelled", "the request was cancelled or timed out")
	}
	return newProblem(http.StatusInternalServerError, ProblemInternal, "Internal error", "an internal error occurred")
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", problemContentType)
	h.Set("Cache-Control", "no-store")
	switch {
	case p.Status == http.StatusServiceUnavailable:
		h.Set("Retry-After", retryAfterUnavailable)
	case p.Type == ProblemConflict:
		h.Set("Retry-After", "1") // as a 409 of a key in progress
	}
	w.WriteHeader(p.Status)
	b, err := encodeJSON(p)
	if err != nil {
		// A Problem holds strings, a number and a map of strings: it
		// always encodes.
		return
	}
	_, _ = w.Write(b)
}

// writeError maps err and writes it; 5xx errors are logged (never sent).
// A conflict (idemtype.ErrConflict: nothing was done, retry) is not stored
// by the Idempotency-Key middleware serving r: a retry with the key runs
// again rather than getting the 409 replayed for a day.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	p := problemFor(err)
	if p.Type == ProblemConflict {
		notStored(r)
	}
	if p.Status >= 500 && logger != nil {
		logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", RequestIDFromContext(r.Context())), slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
	}
	writeProblem(w, p)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// encodeJSON encodes v as the API writes JSON, followed by a newline: as
// json.Marshal does, but without HTML escaping. '<', '>' and '&' are
// written as they are, not as six-byte \u003c escapes, so that a reply is
// as long as its content (the Idempotency-Key middleware stores replies up
// to caps derived from the input limits; see maxJobReplyBytes). As ever,
// encoding/json writes U+2028 and U+2029 in strings as \u2028 and \u2029
// and invalid UTF-8 in strings as \ufffd; raw values (args, results) are
// only compacted.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode reply: %w", err)
	}
	return buf.Bytes(), nil
}

// marshalJSON is encodeJSON without the newline.
func marshalJSON(v any) ([]byte, error) {
	b, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}
