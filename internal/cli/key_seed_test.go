package cli

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/key"
)

// TestKeyScopedNullParts: seed 002's tenant and user are optional (null):
// `idem key` prints the scoped key of an absent tenant or user as an empty
// component, the key key.Scoped and the PHP client derive.
func TestKeyScopedNullParts(t *testing.T) {
	t.Parallel()
	payload := `{"to":"a@example.com","template":"welcome"}`
	for _, c := range []struct {
		name         string
		tenant, user string
	}{
		{"null tenant", "", "user-1"},
		{"null user", "acme", ""},
		{"both null", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want, err := key.Scoped(c.tenant, c.user, "send_email", []byte(payload))
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"key", "--action", "send_email"}
			if c.tenant != "" {
				args = append(args, "--tenant", c.tenant)
			}
			if c.user != "" {
				args = append(args, "--user", c.user)
			}
			out, errOut, code := runCLI(t, payload, args...)
			if code != 0 || !strings.Contains(out, "scoped     "+want+"\n") {
				t.Fatalf("code %d out %q err %q, want scoped %s", code, out, errOut, want)
			}
		})
	}
}

// TestKeyLockWithoutEntities: seed 004's lock key of a run without an
// entity ("cdp-build:tenant-abc123:2026-02-06") needs no JSON on standard
// input: an empty input is read as null, as the recipe's command line
// gives none.
func TestKeyLockWithoutEntities(t *testing.T) {
	t.Parallel()
	for _, stdin := range []string{"", "\n", "null"} {
		out, errOut, code := runCLI(t, stdin, "key", "--function", "cdp-build", "--tenant", "tenant-abc123",
			"--grain", "day", "--time", "2026-02-06T09:00:00Z")
		if code != 0 || !strings.Contains(out, "lock       cdp-build:tenant-abc123:2026-02-06\n") {
			t.Fatalf("stdin %q: code %d out %q err %q", stdin, code, out, errOut)
		}
	}
}

// TestKeyLockEntitiesNotJSONSpace: only JSON's whitespace (space, tab, line
// feed, carriage return) makes an empty input, as in key.Lock; an input of
// other spaces (a vertical tab, a no-break space) is not JSON and is a
// usage error, not a lock key without entities that the clients would
// compute differently.
func TestKeyLockEntitiesNotJSONSpace(t *testing.T) {
	t.Parallel()
	for _, stdin := range []string{"\v", "\u00a0\n", "\f"} {
		out, errOut, code := runCLI(t, stdin, "key", "--function", "cdp-build", "--tenant", "tenant-abc123",
			"--grain", "day", "--time", "2026-02-06T09:00:00Z")
		if code != 2 {
			t.Errorf("stdin %q: code %d out %q err %q; want the usage error 2", stdin, code, out, errOut)
		}
	}
}
