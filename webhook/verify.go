package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a webhook-timestamp may lie from the receiver's
// clock, either way, when Verify is given a tolerance of zero.
const DefaultTolerance = 5 * time.Minute

// Errors returned by [Verify]; test them with errors.Is.
var (
	// ErrMissingHeader reports an absent or empty Standard Webhooks header.
	ErrMissingHeader = errors.New("webhook: missing header")
	// ErrInvalidHeader reports a header that cannot be parsed.
	ErrInvalidHeader = errors.New("webhook: invalid header")
	// ErrTimestampTooOld reports a timestamp older than the tolerance.
	ErrTimestampTooOld = errors.New("webhook: timestamp too old")
	// ErrTimestampTooNew reports a timestamp further ahead than the tolerance.
	ErrTimestampTooNew = errors.New("webhook: timestamp too new")
	// ErrNoMatchingSignature reports that no v1 signature matched any secret.
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")
)

// Verify checks a received webhook: the headers are present, the timestamp is
// within tolerance of now (DefaultTolerance when tolerance is 0) and at least
// one v1 signature matches one of the secrets. Signatures of other versions
// and tokens without a comma are ignored, as the Standard Webhooks
// reference libraries do. Header names are matched whatever their case (h
// need not come from net/http), and the signatures of every
// webhook-signature line count. Comparison is constant-time.
func Verify(secrets []Secret, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secrets) == 0 {
		return ErrNoSecrets
	}
	id, unix, sigs, err := parseHeaders(h)
	if err != nil {
		return err
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if unix > now.Unix()+int64(tolerance/time.Second)+1 {
		// Before time.Unix: seconds near the int64 limit overflow its
		// internal form into a time long past (too old, not too new).
		return ErrTimestampTooNew
	}
	ts := time.Unix(unix, 0)
	if now.Sub(ts) > tolerance {
		return ErrTimestampTooOld
	}
	if ts.Sub(now) > tolerance {
		return ErrTimestampTooNew
	}
	for _, sec := range secrets {
		want := mac(sec, id, unix, body)
		for _, got := range sigs {
			if hmac.Equal(want, got) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// parseHeaders extracts the id, the Unix timestamp and the decoded v1
// signatures.
func parseHeaders(h http.Header) (id string, unix int64, sigs [][]byte, err error) {
	id, tsText := headerValue(h, HeaderID), headerValue(h, HeaderTimestamp)
	sigText := strings.Join(headerValues(h, HeaderSignature), " ")
	if id == "" || tsText == "" || sigText == "" {
		return "", 0, nil, ErrMissingHeader
	}
	unix, err = strconv.ParseInt(tsText, 10, 64)
	if err != nil || unix < 0 {
		return "", 0, nil, fmt.Errorf("%w: %s", ErrInvalidHeader, HeaderTimestamp)
	}
	sigs, err = parseSignatures(sigText)
	if err != nil {
		return "", 0, nil, err
	}
	return id, unix, sigs, nil
}

// headerValues returns every value of the header name, whatever the case of
// its key in h: a map filled by hand or converted from another framework
// (a serverless event's lower-case headers) holds keys net/http did not
// canonicalize, and header names are case-insensitive. Values under keys
// spelt differently are concatenated, the canonical key's first.
func headerValues(h http.Header, name string) []string {
	canonical := http.CanonicalHeaderKey(name)
	var others []string
	for k := range h {
		if k != canonical && strings.EqualFold(k, name) {
			others = append(others, k)
		}
	}
	slices.Sort(others) // the same answer every time
	vs := append([]string(nil), h[canonical]...)
	for _, k := range others {
		vs = append(vs, h[k]...)
	}
	return vs
}

// headerValue returns the first value of the header name, whatever the
// case of its key in h.
func headerValue(h http.Header, name string) string {
	if vs := headerValues(h, name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// parseSignatures decodes the v1 entries of a webhook-signature header.
// Like the Standard Webhooks reference libraries it skips what it does not
// understand: entries of other versions, malformed v1 entries and tokens
// without a comma (a future scheme, garbage), so that none of them hides a
// valid v1 signature; with no v1 signature left nothing can match.
func parseSignatures(text string) ([][]byte, error) {
	var sigs [][]byte
	for _, part := range strings.Fields(text) {
		version, sig, ok := strings.Cut(part, ",")
		if !ok || version != signatureVersion {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue // a malformed entry cannot match; others still may
		}
		sigs = append(sigs, raw)
	}
	if len(sigs) == 0 {
		return nil, ErrNoMatchingSignature
	}
	return sigs, nil
}
