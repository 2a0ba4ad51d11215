package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ErrResultNotJSON is the error of an attempt whose handler returned a
// result that is not JSON; the attempt fails permanently (dead), as running
// the handler again would repeat its work for the same result.
var ErrResultNotJSON = errors.New("result is not valid JSON")

// StorableResult returns a handler's result as both stores hold it (see
// store.FinishCheck): bytes that are not UTF-8 replaced by U+FFFD (as
// encoding/json does for Go strings, and ResultJSON for a target's answer),
// or ErrResultNotJSON when it is not JSON. nil stays nil.
func StorableResult(res []byte) ([]byte, error) {
	if len(res) == 0 {
		return res, nil
	}
	if !utf8.Valid(res) {
		res = bytes.ToValidUTF8(res, []byte("\uFFFD"))
	}
	if !json.Valid(res) {
		return nil, ErrResultNotJSON
	}
	return res, nil
}
