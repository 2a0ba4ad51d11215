package key

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Version names the key derivation algorithm implemented by this package:
// RFC 8785 canonical JSON, SHA-256, lowercase hex, and the formats of
// Prefixed, Scoped and Lock. Its output never changes; see the package
// documentation.
const Version = "v1"

// Versioned returns k tagged with the algorithm version: Version + ":" + k,
// e.g. "v1:batch_e490…".
func Versioned(k string) string { return Version + ":" + k }

// SplitVersion splits a key tagged by Versioned into its version and the
// untagged key. ok is false when k carries no version tag ("v" followed by
// digits, then ':').
func SplitVersion(k string) (version, rest string, ok bool) {
	v, rest, found := strings.Cut(k, ":")
	if !found || len(v) < 2 || v[0] != 'v' {
		return "", k, false
	}
	for i := 1; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return "", k, false
		}
	}
	return v, rest, true
}

// Hash returns the lowercase hex SHA-256 of the canonical form of the JSON
// text data.
func Hash(data []byte) (string, error) { return HashWith(data, nil) }

// HashWith is Hash with canonicalization options.
func HashWith(data []byte, o *Options) (string, error) {
	c, err := CanonicalizeWith(data, o)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// Digest returns the lowercase hex SHA-256 (64 digits) of the bytes of s as
// they are: unlike Hash, s is not read as JSON.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Fit returns k when it is at most limit bytes long, else "sha256:" and
// Digest(k) (71 bytes): a key built from parts that may each be as long as
// a key still fits one, stays the same for the same parts, and is left as
// it was whenever it already fitted. Lengths count bytes, not characters; a
// long k is hashed whole, never cut inside a character.
func Fit(k string, limit int) string {
	if len(k) <= limit {
		return k
	}
	return "sha256:" + Digest(k)
}

// Prefixed returns the content key prefix + "_" + the full SHA-256 hex of
// the canonical payload (seed 001: "batch_e49028d7…").
func Prefixed(prefix string, payload []byte) (string, error) {
	return PrefixedWith(prefix, payload, nil)
}

// PrefixedWith is Prefixed with canonicalization options (for instance
// arrays that are sets).
func PrefixedWith(prefix string, payload []byte, o *Options) (string, error) {
	if err := checkPart("prefix", prefix, ""); err != nil {
		return "", err
	}
	h, err := HashWith(payload, o)
	if err != nil {
		return "", fmt.Errorf("prefixed key: %w", err)
	}
	return prefix + "_" + h, nil
}

// Scoped returns tenant + "_" + user + "_" + action + "_" + the first 16 hex
// digits of the SHA-256 of the canonical payload (seed 002). tenant and user
// must not contain '_'; action may (the hash part has a fixed length, so the
// key stays unambiguous: "send_email" is a seed action). tenant and user may
// be empty: seed 002 renders a null tenant or user as an empty component
// ("_user-1_send_email_…").
func Scoped(tenant, user, action string, payload []byte) (string, error) {
	return ScopedWith(tenant, user, action, payload, nil)
}

// ScopedWith is Scoped with canonicalization options.
func ScopedWith(tenant, user, action string, payload []byte, o *Options) (string, error) {
	if err := checkOptionalPart("tenant", tenant, "_"); err != nil {
		return "", err
	}
	if err := checkOptionalPart("user", user, "_"); err != nil {
		return "", err
	}
	if err := checkPart("action", action, ""); err != nil {
		return "", err
	}
	h, err := HashWith(payload, o)
	if err != nil {
		return "", fmt.Errorf("scoped key: %w", err)
	}
	return tenant + "_" + user + "_" + action + "_" + h[:16], nil
}

// Grain is the time granularity of a lock key.
type Grain string

// The grains and the date each puts in a lock key.
const (
	GrainMinute Grain = "minute" // 2006-01-02T15:04
	GrainHour   Grain = "hour"   // 2006-01-02T15
	GrainDay    Grain = "day"    // 2006-01-02
)

// ParseGrain parses "minute", "hour" or "day". Errors wrap ErrInvalidPart.
func ParseGrain(s string) (Grain, error) {
	switch g := Grain(s); g {
	case GrainMinute, GrainHour, GrainDay:
		return g, nil
	}
	return "", fmt.Errorf("%w: grain %q: want minute, hour or day", ErrInvalidPart, s)
}

// layout returns the time layout of g.
func (g Grain) layout() (string, error) {
	switch g {
	case GrainMinute:
		return "2006-01-02T15:04", nil
	case GrainHour:
		return "2006-01-02T15", nil
	case GrainDay:
		return "2006-01-02", nil
	}
	return "", fmt.Errorf("%w: grain %q: want minute, hour or day", ErrInvalidPart, string(g))
}

// Format returns the grain date of t in loc (UTC when loc is nil).
func (g Grain) Format(t time.Time, loc *time.Location) (string, error) {
	layout, err := g.layout()
	if err != nil {
		return "", err
	}
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format(layout), nil
}

// Lock returns the lock key of seed 004:
// function + ":" + tenant + ":" + the grain date of t in loc + ":" + the
// entity hash, e.g. "detect-alerts:tenant-abc123:2026-02-06:971121298e66".
// The entity hash is seed 004's computeEntityHash: the first 12 hex digits of
// the SHA-256 of the canonical JSON of the entities object as an array of
// [name, value] pairs sorted by name ({"sku":"A","rule_id":"r"} hashes
// [["rule_id","r"],["sku","A"]]), so idem and the seed's TypeScript agree on
// lock keys. entities must be a JSON object. With entities empty
// (nil, or only JSON whitespace: space, tab, line feed, carriage return) or
// the JSON null, the hash part and its ':' are left out (other characters,
// such as a vertical tab or a no-break space, are not JSON: ErrInvalidJSON):
// "cdp-build:tenant-abc123:2026-02-06". A nil loc is UTC. function and
// tenant must not contain ':'; t must not be the zero time.
func Lock(function, tenant string, t time.Time, loc *time.Location, g Grain, entities []byte) (string, error) {
	return LockWith(function, tenant, t, loc, g, entities, nil)
}

// JSONSpace is JSON's whitespace (RFC 8259): the only characters Lock trims
// from entities, and the set every client's lockKey must trim, so that they
// agree on which entities leave the hash out. (bytes.TrimSpace would also trim \v, \f, U+0085,
// U+00A0 and the other Unicode spaces.)
const JSONSpace = " \t\n\r"

// LockWith is Lock with canonicalization options for the entities.
func LockWith(function, tenant string, t time.Time, loc *time.Location, g Grain, entities []byte, o *Options) (string, error) {
	if err := checkPart("function", function, ":"); err != nil {
		return "", err
	}
	if err := checkPart("tenant", tenant, ":"); err != nil {
		return "", err
	}
	if t.IsZero() {
		return "", fmt.Errorf("%w: time is zero", ErrInvalidPart)
	}
	date, err := g.Format(t, loc)
	if err != nil {
		return "", err
	}
	k := function + ":" + tenant + ":" + date
	if trimmed := bytes.Trim(entities, JSONSpace); len(trimmed) == 0 || string(trimmed) == "null" {
		return k, nil
	}
	h, err := EntityHash(entities, o)
	if err != nil {
		return "", fmt.Errorf("lock key: %w", err)
	}
	return k + ":" + h, nil
}

// EntityHash returns seed 004's computeEntityHash of a JSON object: the
// first 12 hex digits of the SHA-256 of the canonical JSON of its [name,
// value] pairs sorted by name. Names sort as JavaScript's default sort does
// (by UTF-16 code units), the order RFC 8785 gives object members. Errors wrap
// ErrInvalidJSON, or ErrInvalidPart when the value is not an object.
func EntityHash(entities []byte, o *Options) (string, error) {
	pairs, err := EntityCanonical(entities, o)
	if err != nil {
		return "", err
	}
	h, err := Hash(pairs)
	if err != nil {
		return "", err
	}
	return h[:12], nil
}

// EntityCanonical returns the text EntityHash hashes: the canonical JSON of
// the entities object's [name, value] pairs sorted by name.
func EntityCanonical(entities []byte, o *Options) ([]byte, error) {
	canon, err := CanonicalizeWith(entities, o)
	if err != nil {
		return nil, err
	}
	if len(canon) == 0 || canon[0] != '{' {
		return nil, fmt.Errorf("%w: entities must be a JSON object", ErrInvalidPart)
	}
	// The canonical object already lists its members sorted by name; rewrite
	// {"a":1,"b":2} as [["a",1],["b",2]] and canonicalize that array.
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
	}
	pairs := []byte{'['}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
		}
		name, err := json.Marshal(tok)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
		}
		if len(pairs) > 1 {
			pairs = append(pairs, ',')
		}
		pairs = append(append(append(append(append(pairs, '['), name...), ','), val...), ']')
	}
	pairs = append(pairs, ']')
	return Canonicalize(pairs)
}

// checkOptionalPart is checkPart for a part that may be empty.
func checkOptionalPart(name, s, forbidden string) error {
	if s == "" {
		return nil
	}
	return checkPart(name, s, forbidden)
}

// checkPart validates one key part: non-empty, valid UTF-8, no control
// characters, and none of the characters in forbidden.
func checkPart(name, s, forbidden string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidPart, name)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidPart, name)
	case strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Errorf("%w: %s %q contains a control character", ErrInvalidPart, name, s)
	case forbidden != "" && strings.ContainsAny(s, forbidden):
		return fmt.Errorf("%w: %s %q must not contain %q", ErrInvalidPart, name, s, forbidden)
	}
	return nil
}
