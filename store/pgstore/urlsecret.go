package pgstore

import (
	"errors"
	"net/url"
	"sort"
	"strings"
)

// errAtInUserinfo refuses a URL whose user info holds an unescaped '@':
// libpq and pgx end the user info at the first '@', so the rest of the
// password would be taken for the host and quoted in connect errors.
var errAtInUserinfo = errors.New(`the URL's user info holds an unescaped "@": write it as %40 in the password (the URL is not shown)`)

// checkUserinfo returns errAtInUserinfo when the authority of the
// postgres:// URL raw (up to its first '/', '?' or '#') holds more than one '@'.
func checkUserinfo(raw string) error {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if strings.Count(rest, "@") > 1 {
		return errAtInUserinfo
	}
	return nil
}

// passwordParts returns what of raw may be its password, longest first:
// the text between the first ':' after "://" and the last '@' (taken
// wide, to hide too much rather than too little), as written and
// unescaped, and its pieces between '@', ':', '/', '?' and '#' of three
// characters or more (a malformed URL is split there by the parsers).
func passwordParts(raw string) []string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	_, pw, ok := strings.Cut(rest[:at], ":")
	if !ok || pw == "" {
		return nil
	}
	parts := []string{pw}
	if u, err := url.PathUnescape(pw); err == nil && u != pw {
		parts = append(parts, u)
	}
	for _, f := range strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("@:/?#", r) }) {
		if len(f) >= 3 {
			parts = append(parts, f)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return len(parts[i]) > len(parts[j]) })
	return parts
}

// hiddenError is an error whose text has the password of a URL masked; it
// wraps the original for errors.Is and errors.As.
type hiddenError struct {
	msg string
	err error
}

func (e *hiddenError) Error() string { return e.msg }
func (e *hiddenError) Unwrap() error { return e.err }

// hidePassword returns err with every part of raw's password masked in
// its text (err itself when its text holds none).
func hidePassword(err error, raw string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, p := range passwordParts(raw) {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	if msg == err.Error() {
		return err
	}
	return &hiddenError{msg: msg, err: err}
}
