package store_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idem-dev/idem/store"
)

// TestStorableError: an error text within MaxErrorBytes is kept whole (made
// storable); a longer one — or one that the U+FFFD replacements make
// longer — is cut on a UTF-8 boundary to end with the cut marker, at most
// MaxErrorBytes in all.
func TestStorableError(t *testing.T) {
	t.Parallel()
	const limit = store.MaxErrorBytes
	marker := func(n int) string { return fmt.Sprintf(" …[cut: %d bytes in all]", n) }
	grown := strings.Repeat("\uFFFDa", limit/2)[:limit-len(marker(limit))]
	grown = strings.ToValidUTF8(grown, "") // the cut falls inside a U+FFFD: back to its start
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short", "boom", "boom"},
		{"NUL and invalid UTF-8", "a\x00b\xff", "a\uFFFDb\uFFFD"},
		{"exactly the limit", strings.Repeat("a", limit), strings.Repeat("a", limit)},
		{"one byte over", strings.Repeat("a", limit+1), strings.Repeat("a", limit-len(marker(limit+1))) + marker(limit+1)},
		{"a rune across the cut", "é" + strings.Repeat("€", limit/3), "é" + strings.Repeat("€", (limit-len(marker(2+3*(limit/3)))-2)/3) + marker(2+3*(limit/3))},
		// Each "\xffa" (2 bytes) becomes "\uFFFDa" (4 bytes).
		{"replacements outgrow the limit", strings.Repeat("\xffa", limit/2), grown + marker(limit)},
	} {
		got := store.StorableError(tc.in)
		if got != tc.want {
			t.Errorf("%s: got %d bytes ending %q, want %d bytes ending %q", tc.name, len(got), got[max(0, len(got)-40):],
				len(tc.want), tc.want[max(0, len(tc.want)-40):])
		}
		if len(got) > limit || !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Errorf("%s: %d bytes, valid UTF-8 %v: not storable", tc.name, len(got), utf8.ValidString(got))
		}
	}
}
