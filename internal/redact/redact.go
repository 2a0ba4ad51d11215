// Package redact hides the secrets of the URLs idem shows (the database
// URL of --print-config, the URLs of delivery targets and subscriptions):
// a password in the user info, the token of a nats:// or http(s) URL (a
// user name without a password) and password and sslpassword (the PostgreSQL client
// key's passphrase) query parameters.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces a password or a token.
const Mask = "xxxxx"

// Unparsable is shown for a URL that url.Parse does not read: where its
// password is cannot be told, so none of it is shown.
const Unparsable = "(not a valid URL; hidden)"

// URL returns raw with its password, token (nats, http, https) and password and
// sslpassword query parameters replaced by Mask. A URL that does not parse gives
// Unparsable, never the raw string.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Unparsable
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else if u.User.Username() != "" && tokenScheme(u.Scheme) {
			// nats://token@host: the user name is the token; an http(s)
			// URL sends it as basic auth, a credential too.
			u.User = url.User(Mask)
		}
	}
	if u.RawQuery != "" {
		q, ok := maskQuery(u.RawQuery)
		if !ok {
			return Unparsable
		}
		u.RawQuery = q
	}
	return u.String()
}

// tokenScheme reports whether a user name without a password is a
// credential in a URL of scheme (nats, http, https); a PostgreSQL user
// name is not.
func tokenScheme(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "nats", "http", "https":
		return true
	}
	return false
}

// maskQuery masks every password and sslpassword parameter of the raw query q, keeping
// the order and the rest as written ("&" and ";" both count as
// separators, to hide too much rather than too little); false when a name
// does not unescape.
func maskQuery(q string) (string, bool) {
	var b strings.Builder
	for q != "" {
		i := strings.IndexAny(q, "&;")
		part, sep := q, ""
		if i >= 0 {
			part, sep, q = q[:i], q[i:i+1], q[i+1:]
		} else {
			q = ""
		}
		name, _, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(name)
		if err != nil {
			return "", false
		}
		if n := strings.ToLower(strings.TrimSpace(name)); n == "password" || n == "sslpassword" {
			part = n + "=" + Mask
		}
		b.WriteString(part)
		b.WriteString(sep)
	}
	return b.String(), true
}
