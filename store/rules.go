package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemtype"
)

// Rules every backend shares. They live here once so the backends cannot
// drift; package storetest proves each of them for every backend.

const (
	// MaxListLimit is the largest page JobList returns; a Limit <= 0 or
	// above it means MaxListLimit.
	MaxListLimit = 500
	// MaxBatch is the batch size of maintenance calls (rescue, promote,
	// delete finished, delete expired records) and of JobRetryMany by
	// filter when their Limit is <= 0.
	MaxBatch = 1000
)

// UnknownDependency is the error of an inserted job whose DependsOn names
// job id, which does not exist in its tenant: bad input naming depends_on
// (an *idemtype.InvalidError, so errors.Is ErrInvalid) that also wraps
// ErrNotFound. Both stores return it, so the HTTP API answers 400 on
// either.
func UnknownDependency(id int64) error {
	return fmt.Errorf("%w: %w", idemtype.Invalid("depends_on", "job %d does not exist", id), idemtype.ErrNotFound)
}

// ListLimit returns the page size JobList uses for a requested limit.
func ListLimit(limit int) int {
	if limit <= 0 || limit > MaxListLimit {
		return MaxListLimit
	}
	return limit
}

// BatchLimit returns the batch size a maintenance call uses for a
// requested limit.
func BatchLimit(limit int) int {
	if limit <= 0 {
		return MaxBatch
	}
	return limit
}

// ErrClosed is returned by every call on a closed store. It wraps
// idemtype.ErrClosed.
var ErrClosed = fmt.Errorf("store: %w", idemtype.ErrClosed)

// RescuedError is the LastError (and the attempt's error) of a job that
// JobRescue took back from a worker whose lease expired.
const RescuedError = "lease expired: the worker stopped heartbeating (lost)"

// SameResult reports whether two results of a completion are the same JSON
// value: a repeated completion with a result that differs only in key order
// or whitespace is the same completion. nil or empty means no result. Bytes
// that are not JSON are compared as bytes.
func SameResult(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// FinishCheck refuses a finish that a backend cannot store as given: a
// Result that is not valid JSON in valid UTF-8 (PostgreSQL's json column
// refuses it), or an Error, ErrorCode, Target or LeaseToken that is not
// valid UTF-8 or holds a NUL byte (PostgreSQL's text refuses both). SQLite
// would keep such bytes, so both backends refuse them here, per item: the
// item's error wraps idemtype.ErrInvalid and the other finishes of the
// call go on. (JSON escapes such as \u0000 are kept: the result column is
// json, not jsonb, on PostgreSQL.)
func FinishCheck(p *JobFinishParams) error {
	if len(p.Result) > 0 {
		if !utf8.Valid(p.Result) {
			return idemtype.Invalid("result", "must be valid UTF-8")
		}
		if !json.Valid(p.Result) {
			return idemtype.Invalid("result", "must be valid JSON")
		}
	}
	for _, f := range [...]struct{ name, v string }{
		{"error", p.Error}, {"error_code", p.ErrorCode}, {"target", p.Target}, {"lease_token", p.LeaseToken},
	} {
		if !utf8.ValidString(f.v) {
			return idemtype.Invalid(f.name, "must be valid UTF-8")
		}
		if strings.IndexByte(f.v, 0) >= 0 {
			return idemtype.Invalid(f.name, "must not contain NUL bytes")
		}
	}
	return nil
}

// FinishAccepted puts the FinishCheck error of each refused finish of ps in
// errs (len(errs) == len(ps)) and returns the accepted finishes with their
// indexes in ps; index is nil when every finish is accepted (accepted is ps).
func FinishAccepted(ps []*JobFinishParams, errs []error) (accepted []*JobFinishParams, index []int) {
	for i, p := range ps {
		if err := FinishCheck(p); err != nil {
			errs[i] = fmt.Errorf("finish job %d: %w", p.ID, err)
		}
		if errs[i] != nil && index == nil {
			index = make([]int, 0, len(ps))
			for j := range i {
				index = append(index, j)
			}
			accepted = append(accepted, ps[:i]...)
		}
		if errs[i] == nil && index != nil {
			index = append(index, i)
			accepted = append(accepted, p)
		}
	}
	if index == nil {
		return ps, nil
	}
	return accepted, index
}

// TargetCheck validates a target for TargetPut and returns its secrets and
// event types as the JSON the backends store.
func TargetCheck(t *DeliveryTarget) (secrets, types string, err error) {
	switch {
	case t.Tenant == "":
		return "", "", idemtype.Invalid("tenant", "empty")
	case t.Name == "":
		return "", "", idemtype.Invalid("name", "empty")
	case t.URL == "":
		return "", "", idemtype.Invalid("url", "empty")
	case t.Queue == "" && t.Kind == "":
		return "", "", idemtype.Invalid("queue", "a target needs a queue or a kind")
	case t.Timeout < 0:
		return "", "", idemtype.Invalid("timeout", "negative")
	case t.MaxAttempts < 0:
		return "", "", idemtype.Invalid("max_attempts", "negative")
	}
	return jsonList(t.Secrets), jsonList(t.EventTypes), nil
}

// TargetNameTaken is the error of TargetPut when the name is held by a
// row of another topic: a plain target (topic "") never replaces a
// subscription (stored as the target "topic/name") of the same name, nor
// the reverse.
func TargetNameTaken(t *DeliveryTarget) error {
	if t.Topic == "" {
		return idemtype.Invalid("name", "%q is the target of a subscription", t.Name)
	}
	return idemtype.Invalid("name", "%q is taken by a target that is not a subscription of topic %q", t.Name, t.Topic)
}

// jsonList encodes a string list as a JSON array ([] when empty).
func jsonList(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(l) // strings always encode
	return string(b)
}

// EventCheck validates an event for EventInsert: bytes that are not UTF-8
// (in the payload, the metadata or a text field) and NUL bytes in a text
// field are refused on both backends, as PostgreSQL's text and json refuse
// them.
func EventCheck(e *Event) error {
	for _, f := range [...]struct{ name, v string }{
		{"tenant", e.Tenant}, {"topic", e.Topic}, {"key", e.Key}, {"type", e.Type}, {"partition_key", e.PartitionKey},
	} {
		if !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
			return idemtype.Invalid(f.name, "must be valid UTF-8 without NUL bytes")
		}
	}
	switch {
	case e.Tenant == "":
		return idemtype.Invalid("tenant", "empty")
	case e.Topic == "":
		return idemtype.Invalid("topic", "empty")
	case !utf8.Valid(e.Payload):
		return idemtype.Invalid("payload", "must be valid UTF-8")
	case !utf8.Valid(e.Metadata):
		return idemtype.Invalid("metadata", "must be valid UTF-8")
	case !json.Valid(e.Payload):
		return idemtype.Invalid("payload", "not valid JSON")
	case len(e.Metadata) > 0 && (!json.Valid(e.Metadata) || bytes.TrimSpace(e.Metadata)[0] != '{'):
		return idemtype.Invalid("metadata", "not a JSON object")
	case hasNULEscape(e.Payload):
		return idemtype.Invalid("payload", `holds the NUL character (\u0000)`)
	case hasNULEscape(e.Metadata):
		return idemtype.Invalid("metadata", `holds the NUL character (\u0000)`)
	}
	return nil
}

// hasNULEscape reports whether the valid JSON text b holds a string with
// the NUL character, which PostgreSQL's text (and its JSON functions)
// cannot hold: a metadata filter over such an event fails. Valid JSON has
// no raw NUL and backslashes only in strings, so each backslash starts an
// escape.
func hasNULEscape(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) && string(b[i+2:i+6]) == "0000" {
			return true
		}
		i++ // skip the escaped character ("\\" is one backslash)
	}
	return false
}

// RefusalClassifier is implemented by stores that can tell an error about
// the data of a request (PostgreSQL's data exceptions, SQLite's "too big"),
// which a retry would meet again, from other failures.
type RefusalClassifier interface {
	// IsRefused reports whether the store refused err's request for the
	// data it holds.
	IsRefused(err error) bool
}

// Refused reports whether err refuses a request for its data: it wraps
// idemtype.ErrInvalid (store.FinishCheck's per-item errors among them) or
// st, a RefusalClassifier, says so. A retry of such a request fails again.
func Refused(st any, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, idemtype.ErrInvalid) {
		return true
	}
	c, ok := st.(RefusalClassifier)
	return ok && c.IsRefused(err)
}

// MaxErrorBytes bounds the error text of a failed attempt as stored (a
// job's LastError and its attempt's Error): idem.MaxErrorBytes, 64 KiB.
// The HTTP API's reply caps count on it (idemhttp's maxJobReplyBytes).
const MaxErrorBytes = 64 << 10

// StorableError returns the error text of a failed attempt as it is
// stored: StorableText, cut to at most MaxErrorBytes on a UTF-8 boundary
// and then ending with " …[cut: N bytes in all]" (N the length of s).
// Every path that writes an attempt's error — a Go handler's, a pull
// worker's fail, a webhook delivery's, a refused finish — goes through it.
func StorableError(s string) string {
	full := len(s)
	if full > MaxErrorBytes {
		s = s[:MaxErrorBytes] // the rest is dropped unread
	}
	s = StorableText(s)
	if full <= MaxErrorBytes && len(s) <= MaxErrorBytes {
		return s
	}
	marker := fmt.Sprintf(" …[cut: %d bytes in all]", full)
	keep := min(MaxErrorBytes-len(marker), len(s))
	for keep > 0 && keep < len(s) && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + marker
}

// ReadError returns an error text read from a store (a job's LastError,
// an attempt's Error) as the stores return it: one longer than
// MaxErrorBytes, stored whole before StorableError cut texts, is cut as
// StorableError cuts (its marker counting the stored length), so that
// no reply built from a row outgrows the caps that count on MaxErrorBytes;
// any other is s unchanged. Old rows are cut when read, not rewritten.
func ReadError(s string) string {
	if len(s) <= MaxErrorBytes {
		return s
	}
	return StorableError(s)
}

// StorableText returns s as every store holds text: bytes that are not
// UTF-8 and NUL bytes, which PostgreSQL's text refuses (FinishCheck),
// become U+FFFD.
func StorableText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// FailureClassifier is implemented by stores that can tell a storage
// failure (database unreachable, disk full, read-only file system) from a
// refused request. Both stores implement it; Classify applies it.
type FailureClassifier interface {
	// IsUnavailable reports whether err is a storage failure that a retry
	// later may not meet.
	IsUnavailable(err error) bool
}

// Classify returns err marked with idemtype.ErrUnavailable when st
// classifies it as a storage failure, and err unchanged otherwise. The
// original error stays reachable with errors.Is and errors.As.
func Classify(st any, err error) error {
	if err == nil || errors.Is(err, idemtype.ErrUnavailable) || errors.Is(err, idemtype.ErrClosed) {
		return err
	}
	if c, ok := st.(FailureClassifier); ok && c.IsUnavailable(err) {
		return &unavailableError{err: err}
	}
	return err
}

// unavailableError is a storage failure: it unwraps to the failure and to
// idemtype.ErrUnavailable.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{e.err, idemtype.ErrUnavailable} }
