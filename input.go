package idem

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/jsonrule"
	"github.com/idem-dev/idem/store"
)

// Limits on input every store shares: the rules live here once, so the
// SQLite and PostgreSQL stores see only input both can hold unchanged, and
// the HTTP API and the Go library give the same answer (an error wrapping
// ErrInvalid, nothing written).
const (
	// MinPriority and MaxPriority bound a job's priority (the range of a
	// 32-bit integer, the column type of both stores).
	MinPriority = math.MinInt32
	MaxPriority = math.MaxInt32
	// MaxJSONDepth is the deepest nesting of arrays and objects accepted in
	// args, metadata and results.
	MaxJSONDepth = jsonrule.MaxDepth
	// MaxErrorBytes bounds the error text of a failed attempt: a pull
	// worker's longer fail text is refused (ErrInvalid naming error), a Go
	// handler's (or a webhook delivery's) is stored cut to it, ending with
	// " …[cut: N bytes in all]" (store.StorableError).
	MaxErrorBytes = store.MaxErrorBytes
)

// ValidateJSON checks a JSON document of field (args, metadata, result):
// strict JSON in valid UTF-8, no duplicate member names, no lone surrogate
// escapes, numbers within the double range, nesting at most MaxJSONDepth
// deep and at most MaxArgsBytes long. The same rule applies whether or not
// the job carries an idempotency key (whose fingerprint needs the canonical
// form of exactly such JSON). It is internal/jsonrule's, which the Go HTTP
// client applies too.
func ValidateJSON(field string, b []byte) error {
	return jsonrule.Validate(field, b)
}

// ValidateText checks free text of field (an error message): valid UTF-8,
// no NUL byte, at most max bytes.
func ValidateText(field, v string, max int) error {
	if len(v) > max {
		return idemtype.Invalid(field, "must be at most %d bytes", max)
	}
	if !utf8.ValidString(v) {
		return idemtype.Invalid(field, "must be valid UTF-8")
	}
	if strings.IndexByte(v, 0) >= 0 {
		return idemtype.Invalid(field, "must not contain NUL bytes")
	}
	return nil
}

// ValidatePriority checks a priority against MinPriority..MaxPriority.
func ValidatePriority(p int) error {
	if p < MinPriority || p > MaxPriority {
		return idemtype.Invalid("priority", "must be between %d and %d", MinPriority, MaxPriority)
	}
	return nil
}

// ValidateFilter checks the strings of a job filter: a queue, kind,
// partition key or idempotency key that no job can have (not printable
// ASCII, too long) is bad input, not an empty match.
func ValidateFilter(f *JobFilter) error {
	for _, s := range []struct{ name, v string }{
		{"queue", f.Queue}, {"kind", f.Kind},
		{"partition_key", f.PartitionKey}, {"idempotency_key", f.IdempotencyKey},
	} {
		if s.v == "" {
			continue
		}
		if err := ValidateKey(s.name, s.v); err != nil {
			return err
		}
	}
	if f.ErrorCode != "" {
		if err := ValidateName("error_code", f.ErrorCode); err != nil {
			return err
		}
	}
	for _, s := range f.States {
		if !s.Valid() {
			return idemtype.Invalid("state", "unknown state %q", s)
		}
	}
	return nil
}
