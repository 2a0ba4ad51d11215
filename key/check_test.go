package key

import (
	"errors"
	"testing"
)

// TestCheck: Check accepts exactly what Canonicalize accepts — one strict
// JSON value, surrounding space allowed — and rejects trailing data, invalid
// values and nesting deeper than maxDepth, each with ErrInvalidJSON.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{`{"a":[1,2.5,"x",true,null]}`, ` 7 `, `"s"`, `[[1]]`} {
		if err := Check([]byte(ok), 2); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
		if _, err := Canonicalize([]byte(ok)); err != nil {
			t.Errorf("Canonicalize(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{`{} {}`, `1 x`, `[1,]`, `{"a":1,"a":2}`, `01`, `[[[1]]]`, ``} {
		err := Check([]byte(bad), 2)
		if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Check(%q) = %v, want ErrInvalidJSON", bad, err)
		}
	}
	if err := Check([]byte(`[[[1]]]`), 0); err != nil { // 0: the parser's own limit
		t.Errorf("Check at the default depth: %v", err)
	}
}
