package key

import (
	"errors"
	"strings"
	"testing"
)

// TestTruncatedInputIsAnError: JSON text cut anywhere — after a member
// name, after a member's value, inside an array, right after a string's
// opening quote or an escape, inside a \u escape or a surrogate pair — is
// rejected with ErrInvalidJSON, never read past its end (each of these
// panicked under a mutant of a bounds check in the parser).
func TestTruncatedInputIsAnError(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"a"`,           // end where ':' is expected
		`{"a":1`,         // end where ',' or '}' is expected
		`[1`,             // end where ',' or ']' is expected
		`"`,              // end right after the opening quote
		`["`,             // the same, nested
		`"\n`,            // end right after an escape
		`"ab\t`,          // the same after plain characters
		`"\u12`,          // a \u escape cut short
		`"\ud800`,        // a high surrogate, end where its pair is expected
		`"\ud800\`,       // ... cut after the pair's backslash
		`"\ud800\u`,      // ... cut after the pair's "\u"
		`"\ud800\udc0`,   // ... cut inside the pair
		`{"a":"\u0041"`,  // a member's string complete, object not
		`"\u0041`,        // four hex digits ending the input
		`"\ud800\udc00`,  // a whole pair ending the input
		`{"a":[1,{"b":"`, // deep, cut after a quote
	} {
		for name, run := range map[string]func() error{
			"Canonicalize": func() error { _, err := Canonicalize([]byte(in)); return err },
			"Check":        func() error { return Check([]byte(in), 0) },
		} {
			if err := run(); !errors.Is(err, ErrInvalidJSON) {
				t.Errorf("%s(%q) = %v, want ErrInvalidJSON", name, in, err)
			}
		}
	}
	// Cut right after a complete \u escape, the string is what is
	// unterminated; the escape itself was valid.
	for _, in := range []string{`"\u0041`, `"\ud800\udc00`} {
		if _, err := Canonicalize([]byte(in)); err == nil || !strings.Contains(err.Error(), "unterminated string") {
			t.Errorf("Canonicalize(%q) = %v, want an unterminated string", in, err)
		}
	}
}

// TestParserStaysWithinItsInput: input that is a prefix of a larger
// buffer (a request body read into a bigger one) is parsed as that prefix
// alone: a \u escape cut by the end of the input is invalid even when the
// bytes past it, in the buffer's capacity, would complete it.
func TestParserStaysWithinItsInput(t *testing.T) {
	t.Parallel()
	buf := []byte(`"\u1234"`)
	for _, in := range [][]byte{buf[:4], buf[:5], buf[:6]} { // "\u1, "\u12, "\u123
		_, err := Canonicalize(in)
		if !errors.Is(err, ErrInvalidJSON) || !strings.Contains(err.Error(), `invalid \u escape`) {
			t.Errorf("Canonicalize(%q) = %v, want an invalid \\u escape", in, err)
		}
	}
}

// TestDigitBoundsAndSurrogateRange: the digits '0' and '9' are digits
// wherever a number needs one (after '.', in an exponent), '0', '9', 'a',
// 'A', 'f' and 'F' are hex digits in a \u escape, and the low
// surrogates U+DC00 and U+DFFF both complete a pair (the ends of each
// range, which boundary mutants of the parser moved).
func TestDigitBoundsAndSurrogateRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`1.9`, `1.9`},
		{`1.0`, `1`},
		{`1e9`, `1000000000`},
		{`2E0`, `2`},
		{`1e+9`, `1000000000`},
		{`"\ud800\udc00"`, "\"\U00010000\""},
		{`"\udbff\udfff"`, "\"\U0010FFFF\""},
		{`"\uD83D\uDE00"`, "\"\U0001F600\""},
		{`"\u00A9\u00a9\u0090"`, "\"\u00a9\u00a9\u0090\""}, // hex digits A, a, 9 and 0
	} {
		got, err := Canonicalize([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonicalize(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`"\ud800\udbff"`, `"\ud800\ue000"`, `"\ud800\u0041"`} {
		if _, err := Canonicalize([]byte(bad)); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Canonicalize(%s) = %v, want ErrInvalidJSON (no low surrogate)", bad, err)
		}
	}
}

// TestObjectNestingCountsTowardsTheLimit: objects count towards the depth
// limit as arrays do (a mutant counted them down, so nested objects never
// reached the limit).
func TestObjectNestingCountsTowardsTheLimit(t *testing.T) {
	t.Parallel()
	if err := Check([]byte(`{"a":{"b":1}}`), 2); err != nil {
		t.Errorf("two objects deep at limit 2: %v", err)
	}
	for _, deep := range []string{`{"a":{"b":{"c":1}}}`, `{"a":[{"c":1}]}`, `[{"a":[1]}]`} {
		if err := Check([]byte(deep), 2); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Check(%s, 2) = %v, want ErrInvalidJSON (three deep)", deep, err)
		}
	}
	deep := strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1)
	if _, err := Canonicalize([]byte(deep)); !errors.Is(err, ErrInvalidJSON) {
		t.Errorf("%d objects deep: %v, want ErrInvalidJSON", maxDepth+1, err)
	}
}

// TestVersionDigits: a version tag is 'v' and digits, '0' and '9'
// included.
func TestVersionDigits(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"v0:x", "v9:x", "v1090:x"} {
		v, rest, ok := SplitVersion(k)
		if !ok || v != k[:strings.IndexByte(k, ':')] || rest != "x" {
			t.Errorf("SplitVersion(%q) = %q %q %v", k, v, rest, ok)
		}
	}
	for _, k := range []string{"v/:x", "v::x", "v1a:x"} { // '/' and ':' border the digits
		if _, _, ok := SplitVersion(k); ok {
			t.Errorf("SplitVersion(%q) accepted", k)
		}
	}
}

// TestSetPathTildeAtTheEnd: a '~' ending a set path segment is an invalid
// escape (ErrInvalidPart), not a read past the segment.
func TestSetPathTildeAtTheEnd(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/a~", "/~", "/a~/b"} {
		if _, err := CanonicalizeWith([]byte(`{"a":[1]}`), &Options{Sets: []string{path}}); !errors.Is(err, ErrInvalidPart) {
			t.Errorf("set path %q: %v, want ErrInvalidPart", path, err)
		}
	}
}
