package redact_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/redact"
)

// TestURL: passwords, tokens (a user name without a password, which an
// http(s) or nats URL sends as a credential) and password query parameters
// are masked; a PostgreSQL user name is not a secret and stays.
func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://u:s3cret@example.com/hook", "https://u:xxxxx@example.com/hook"},
		{"https://s3cret@example.com/hook", "https://xxxxx@example.com/hook"},
		{"http://s3cret@example.com/hook", "http://xxxxx@example.com/hook"},
		{"nats://s3cret@127.0.0.1:4222/orders", "nats://xxxxx@127.0.0.1:4222/orders"},
		{"postgres://idem@db/idem", "postgres://idem@db/idem"},
		{"postgres://idem:s3cret@db/idem?sslpassword=k&x=1", "postgres://idem:xxxxx@db/idem?sslpassword=xxxxx&x=1"},
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://u:p@x:bad/", redact.Unparsable},
	} {
		if got := redact.URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
