package key

import "unicode/utf8"

// AppendCanonical appends the RFC 8785 (JCS) canonical form of the JSON
// text data to buf: the same bytes as Canonicalize, written in place, for
// callers that assemble a larger canonical document from parts. Errors
// wrap ErrInvalidJSON; on error buf is returned unchanged.
func AppendCanonical(buf, data []byte) ([]byte, error) {
	v, err := parseDocument(data, 0)
	if err != nil {
		return buf, err
	}
	e := encoder{buf: buf}
	e.value(&v)
	return e.buf, nil
}

// AppendString appends s as a canonical JSON string literal and reports
// true, or returns buf unchanged and false when s is not valid UTF-8 (a
// caller that wants encoding/json's replacement of invalid bytes takes
// another path).
func AppendString(buf []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return buf, false
	}
	return appendString(buf, s), true
}

// AppendInt appends n as a canonical JSON number: the shortest form of the
// double nearest to n (exact up to 2^53), as Canonicalize writes it.
func AppendInt(buf []byte, n int64) []byte {
	return appendNumber(buf, float64(n))
}
