package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The human (non --json) output prints text the server returns: error
// messages, kinds, keys, metadata, names. Any enqueuer or worker chose
// that text, so it must not reach the operator's terminal raw: an ESC
// starts a sequence that can clear the screen, move the cursor over the
// lines above, retitle the window or write the clipboard (OSC 52). cell
// and lines are the one way such text is printed: every C0 and C1 control
// character, DEL and the bidirectional overrides show as a visible escape
// (`\x1b`, `\u009b`, `\u202e`), invalid UTF-8 as U+FFFD, and a cut falls
// between characters, never inside one. --json output is left alone:
// encoding/json escapes it and keeps the exact text.

// detailTab is what a tab in a detail value becomes: tabs would otherwise
// split the value into tabwriter columns.
const detailTab = "    "

// cell renders s as one table cell (or one-line field): line breaks and
// tabs become spaces, control characters visible escapes, and at most max
// characters remain, the last of them "…" when s was cut (max 0 = no cut).
func cell(s string, max int) string {
	s = strings.ReplaceAll(s, "\r\n", " ")
	s = strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(s)
	s = escapeControls(s)
	if max > 0 && utf8.RuneCountInString(s) > max {
		i, n := 0, 0
		for i = range s {
			if n == max-1 {
				break
			}
			n++
		}
		s = s[:i] + "…"
	}
	return s
}

// lines renders s as the lines of a detail value: it splits s at its line
// breaks (\n or \r\n), turns tabs into spaces and shows every other control
// character as a visible escape.
func lines(s string) []string {
	ls := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range ls {
		ls[i] = escapeControls(strings.ReplaceAll(l, "\t", detailTab))
	}
	return ls
}

// escapeControls writes each character a terminal would act on as a
// visible Go-style escape and each invalid UTF-8 byte as U+FFFD.
func escapeControls(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s { // an invalid byte comes as utf8.RuneError, U+FFFD
		switch {
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || unsafeRune(r) {
			return true
		}
	}
	return false
}

// unsafeRune reports the non-ASCII characters a terminal acts on or that
// reorder what is shown: the C1 controls (U+0080–U+009F, among them the
// one-character CSI and OSC), the line and paragraph separators and the
// bidirectional marks, embeddings, overrides and isolates.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
