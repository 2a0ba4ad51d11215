package key

import (
	"errors"
	"testing"
	"time"
)

// TestLockEntitiesWhitespace: entities that are empty after JSON's
// whitespace (space, tab, line feed, carriage return; RFC 8259) — or the
// JSON null so spaced — leave the hash part out, as in the PHP client's
// trim(" \t\n\r"). Other characters a language's trim removes (vertical
// tab, form feed, NEL, no-break space, U+2028, BOM) are not JSON
// whitespace: such entities are not JSON and are refused (ErrInvalidJSON),
// as Canonicalize refuses them, instead of a key without a hash that no
// other client would compute the same way.
func TestLockEntitiesWhitespace(t *testing.T) {
	t.Parallel()
	when := time.Date(2026, 2, 6, 14, 5, 9, 0, time.UTC)
	const bare = "cdp-build:tenant-abc123:2026-02-06"
	for _, in := range []string{"", " ", " \t\r\n", "\n null \t"} {
		got, err := Lock("cdp-build", "tenant-abc123", when, nil, GrainDay, []byte(in))
		if err != nil || got != bare {
			t.Errorf("Lock(entities %q) = %q, %v; want %q", in, got, err, bare)
		}
	}
	for _, in := range []string{"\v", "\f", " \u00a0 ", "\u0085", "\u2028", "\u3000", "\ufeff", "\v null"} {
		got, err := Lock("cdp-build", "tenant-abc123", when, nil, GrainDay, []byte(in))
		if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Lock(entities %q) = %q, %v; want ErrInvalidJSON (not JSON whitespace)", in, got, err)
		}
		if _, cerr := Canonicalize([]byte(in)); !errors.Is(cerr, ErrInvalidJSON) {
			t.Errorf("Canonicalize(%q): %v, want ErrInvalidJSON", in, cerr)
		}
	}
}
