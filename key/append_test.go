package key_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/idem-dev/idem/key"
)

// TestAppendCanonical: the same bytes as Canonicalize after a prefix, the
// same errors, and buf unchanged on error.
func TestAppendCanonical(t *testing.T) {
	for _, in := range []string{`{"b":1,"a":[1e21,-0,"\u00e9"]}`, ` null `, `"\u2028"`, `{"a":1,"a":2}`, `[1,`, ``, `1 2`} {
		want, wantErr := key.Canonicalize([]byte(in))
		got, err := key.AppendCanonical([]byte("x:"), []byte(in))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, Canonicalize's %v", in, err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, key.ErrInvalidJSON) || string(got) != "x:" {
				t.Fatalf("%q: error %v, buf %q", in, err, got)
			}
			continue
		}
		if !bytes.Equal(got, append([]byte("x:"), want...)) {
			t.Fatalf("%q: %q, Canonicalize %q", in, got, want)
		}
	}
}

// TestAppendStringAndInt: strings and integers as Canonicalize writes
// them inside a document; invalid UTF-8 is refused.
func TestAppendStringAndInt(t *testing.T) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\t", "é😀", "\u2028<>&"} {
		got, ok := key.AppendString(nil, s)
		want, err := key.CanonicalValue(s)
		if !ok || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: %q (%v), want %q (%v)", s, got, ok, want, err)
		}
	}
	if got, ok := key.AppendString([]byte("x"), "a\xff"); ok || string(got) != "x" {
		t.Fatalf("invalid UTF-8: %q, %v", got, ok)
	}
	for _, n := range []int64{0, -1, 42, 1 << 53, 1<<53 + 1, 1 << 62, -1 << 63} {
		want, err := key.CanonicalValue(n)
		if got := key.AppendInt(nil, n); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d: %q, want %q (%v)", n, got, want, err)
		}
	}
}
