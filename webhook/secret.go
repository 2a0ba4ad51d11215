package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// SecretPrefix starts the text form of a [Secret].
const SecretPrefix = "whsec_"

// masked is what a Secret prints as wherever it might be logged.
const masked = "whsec_********"

// ErrInvalidSecret reports a secret that is not "whsec_" followed by base64.
var ErrInvalidSecret = errors.New("webhook: invalid secret")

// Secret is a signing key. Its String, GoString, Format and LogValue methods
// mask it, so it never appears in logs or error messages; [Secret.Reveal]
// returns the text form for storage.
type Secret struct {
	key []byte
}

// ParseSecret decodes "whsec_<base64>". The prefix is optional, as in the
// reference libraries; the key must be at least 16 bytes long (the spec asks
// for 24 to 64 bytes and generates 32).
func ParseSecret(s string) (Secret, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
	if err != nil {
		return Secret{}, fmt.Errorf("%w: not base64", ErrInvalidSecret)
	}
	if len(key) < 16 {
		return Secret{}, fmt.Errorf("%w: %d bytes, want at least 16", ErrInvalidSecret, len(key))
	}
	return Secret{key: key}, nil
}

// NewSecret wraps raw key bytes (copied).
func NewSecret(key []byte) Secret {
	return Secret{key: append([]byte(nil), key...)}
}

// IsZero reports whether the secret holds no key.
func (s Secret) IsZero() bool { return len(s.key) == 0 }

// Reveal returns the "whsec_<base64>" text form. Use it only to store or show
// the secret once to its owner.
func (s Secret) Reveal() string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)
}

// String masks the secret.
func (s Secret) String() string { return masked }

// GoString masks the secret for %#v.
func (s Secret) GoString() string { return masked }

// Format masks the secret for every fmt verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(masked)) }

// LogValue masks the secret for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(masked) }

// MarshalText masks the secret so it cannot leak through JSON or YAML
// encoding of a config struct; store [Secret.Reveal] explicitly instead.
func (s Secret) MarshalText() ([]byte, error) { return []byte(masked), nil }
