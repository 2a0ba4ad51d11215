// Package jsonrule is the one rule for the JSON documents idem stores and
// serves back (a job's args, metadata and result, a result lease's
// result): package idem applies it (idem.ValidateJSON, and so the HTTP
// API), and the Go HTTP client (idemclient) applies the same function
// before sending, so that both refuse the same documents with the same
// error.
package jsonrule

import (
	"errors"
	"strings"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/key"
)

const (
	// MaxBytes bounds a document (idem.MaxArgsBytes).
	MaxBytes = 1 << 20
	// MaxDepth is the deepest nesting of arrays and objects accepted
	// (idem.MaxJSONDepth).
	MaxDepth = 64
)

// Validate checks the JSON document b of field: strict JSON in valid
// UTF-8, no duplicate member names, no lone surrogate escapes, numbers
// within the double range, nesting at most MaxDepth deep and at most
// MaxBytes long. A refusal is an *idemtype.InvalidError naming field
// (errors.Is idemtype.ErrInvalid).
func Validate(field string, b []byte) error {
	if len(b) > MaxBytes {
		return idemtype.Invalid(field, "must be JSON of at most %d bytes", MaxBytes)
	}
	if err := key.Check(b, MaxDepth); err != nil {
		reason := err.Error()
		if errors.Is(err, key.ErrInvalidJSON) {
			reason = strings.TrimPrefix(reason, key.ErrInvalidJSON.Error()+": ")
		}
		return idemtype.Invalid(field, "must be valid JSON (at most %d levels deep): %s", MaxDepth, reason)
	}
	return nil
}
