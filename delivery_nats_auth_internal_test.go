package idem

import (
	"net/url"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestNATSDialCarriesCredentials: the user and password, or the token, of
// a nats:// target URL reach the connection options (they used to be
// dropped: only host:port was dialled), and targets with other credentials
// to one server do not share a connection.
func TestNATSDialCarriesCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw                   string
		user, password, token string
	}{
		{"nats://idem:s3cret@127.0.0.1:4222/orders", "idem", "s3cret", ""},
		{"nats://idem:p%40ss@127.0.0.1:4222/orders", "idem", "p@ss", ""},
		{"nats://t0ken@127.0.0.1:4222/orders", "", "", "t0ken"},
		{"nats://127.0.0.1:4222/orders", "", "", ""},
	}
	keys := map[string]string{}
	for _, tt := range tests {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatal(err)
		}
		addr, key, opts := natsDial(u)
		if addr != "nats://127.0.0.1:4222" {
			t.Errorf("%s: dials %q, want nats://127.0.0.1:4222 (no credentials in the address)", tt.raw, addr)
		}
		o := nats.GetDefaultOptions()
		for _, opt := range opts {
			if err := opt(&o); err != nil {
				t.Fatal(err)
			}
		}
		if o.User != tt.user || o.Password != tt.password || o.Token != tt.token {
			t.Errorf("%s: options user %q password %q token %q, want %q %q %q", tt.raw, o.User, o.Password, o.Token,
				tt.user, tt.password, tt.token)
		}
		if other, ok := keys[key]; ok {
			t.Errorf("%s and %s share the connection key", tt.raw, other)
		}
		keys[key] = tt.raw
	}
}
