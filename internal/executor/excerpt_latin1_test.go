package executor

import (
	"strings"
	"testing"
)

// TestExcerptKeepsTextAfterInvalidBytes: an answer that is not UTF-8 (a
// Latin-1 receiver's) keeps its first n bytes, invalid bytes included
// (deliveryError quotes them as \xNN); only a UTF-8 rune that the cut
// would split is left out, and a byte that starts no valid rune is never
// taken for one. Before the fix excerpt backed off until the text was
// valid UTF-8: a Latin-1 answer over n bytes was cut back to just before
// its first non-ASCII byte.
func TestExcerptKeepsTextAfterInvalidBytes(t *testing.T) {
	t.Parallel()
	latin1 := "Fehler: Ung\xfcltige Anfrage, " + strings.Repeat("Gr\xfc\xdfe ", 100) // 627 bytes
	got := excerpt([]byte(latin1), MaxErrorExcerpt)
	if want := latin1[:MaxErrorExcerpt] + "…"; got != want {
		t.Errorf("Latin-1 answer of %d bytes: excerpt of %d bytes %q, want its first %d bytes", len(latin1), len(got), got, MaxErrorExcerpt)
	}
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"ab\xe9cd", 3, "ab\xe9…"},                    // a Latin-1 é (a lead byte without its continuation) at the cut is one byte, kept
		{"ab\xe9\x82", 3, "ab\xe9…"},                  // a lead byte whose continuation falls beyond the cut but forms no rune: kept
		{"ab\xe2\x82\xac", 4, "ab…"},                  // € split by the cut: left out whole
		{"\xb0\xb0\xb0\xb0x", 4, "\xb0\xb0\xb0\xb0…"}, // continuation bytes only (Latin-1 °): kept
		{"a\xf0\x9f\x98\x80", 4, "a…"},                // a 4-byte rune split by the cut
		{"\xf0\x9f\x98\x80b", 4, "\xf0\x9f\x98\x80…"}, // ends exactly at the cut: kept
	} {
		if got := excerpt([]byte(c.in), c.n); got != c.want {
			t.Errorf("excerpt(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
