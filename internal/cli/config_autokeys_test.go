package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// autoKeysConfig derives seed 002's key for the queue "emails" and, with
// a user field of its own and no tenant, for the kind "orders.paid" (a
// dotted name, as queue and kind names may be).
const autoKeysConfig = `
[auto_key_by_queue.emails]
action = "send_email"

[auto_key_by_kind."orders.paid"]
action = "order_paid"
user_field = "customer"
no_tenant = true
`

// TestConfigAutoKeys: [auto_key_by_queue.NAME] and [auto_key_by_kind.NAME]
// (file only) reach idem.Config.AutoKeyByQueue and AutoKeyByKind, so
// `idem serve` derives the key of every job of those queues and kinds
// enqueued without one (seed 002); --print-config prints them back.
func TestConfigAutoKeys(t *testing.T) {
	t.Parallel()
	want := func(what string, cfg *ServeConfig) {
		t.Helper()
		c := cfg.clientConfig(&idem.Config{})
		if q := map[string]idem.AutoKey{"emails": {Action: "send_email"}}; !reflect.DeepEqual(c.AutoKeyByQueue, q) {
			t.Errorf("%s: AutoKeyByQueue %+v, want %+v", what, c.AutoKeyByQueue, q)
		}
		k := map[string]idem.AutoKey{"orders.paid": {Action: "order_paid", UserField: "customer", NoTenant: true}}
		if !reflect.DeepEqual(c.AutoKeyByKind, k) {
			t.Errorf("%s: AutoKeyByKind %+v, want %+v", what, c.AutoKeyByKind, k)
		}
	}
	cfg, err := loadFile(t, autoKeysConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	want("the file", cfg)
	text, err := printConfig(cfg)
	if err != nil || !strings.Contains(text, "auto_key_by_queue") || !strings.Contains(text, "orders.paid") {
		t.Fatalf("--print-config (%v):\n%s", err, text)
	}
	again, err := loadFile(t, text, nil)
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v\n%s", err, text)
	}
	want("the printed configuration", again)

	t.Run("none by default", func(t *testing.T) {
		t.Parallel()
		cfg, err := loadFile(t, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c := cfg.clientConfig(&idem.Config{}); c.AutoKeyByQueue != nil || c.AutoKeyByKind != nil {
			t.Fatalf("defaults: %v %v, want nil maps", c.AutoKeyByQueue, c.AutoKeyByKind)
		}
	})
	t.Run("an empty entry takes the kind and the user field user", func(t *testing.T) {
		t.Parallel()
		cfg, err := loadFile(t, "[auto_key_by_queue.notifications]\n", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.clientConfig(&idem.Config{}).AutoKeyByQueue; !reflect.DeepEqual(got, map[string]idem.AutoKey{"notifications": {}}) {
			t.Fatalf("AutoKeyByQueue %+v", got)
		}
	})
	t.Run("bad values stop start-up naming their key", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, file, want string
		}{
			{"a queue name with a space", "[auto_key_by_queue.\"bad queue\"]\naction = \"a\"\n", "auto_key_by_queue.bad queue"},
			{"a kind name with a space", "[auto_key_by_kind.\"send email\"]\n", "auto_key_by_kind.send email"},
			{"an action with a control character", "[auto_key_by_queue.emails]\naction = \"send\\temail\"\n", "auto_key_by_queue.emails.action"},
			{"an action outside printable ASCII", "[auto_key_by_kind.send_email]\naction = \"envoyer_é\"\n", "auto_key_by_kind.send_email.action"},
			{"an action too long for a key", "[auto_key_by_queue.emails]\naction = \"" + strings.Repeat("a", idem.MaxKeyLength) + "\"\n", "auto_key_by_queue.emails.action"},
			{"an empty user field", "[auto_key_by_queue.emails]\nuser_field = \"\"\n", "auto_key_by_queue.emails.user_field"},
			{"a misspelt key", "[auto_key_by_queue.emails]\nactoin = \"send_email\"\n", "actoin"},
			{"a string for no_tenant", "[auto_key_by_kind.send_email]\nno_tenant = \"maybe\"\n", "no_tenant"},
		} {
			_, err := loadFile(t, tc.file, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
				continue
			}
			if code, _ := classify(err); code != ExitUsage {
				t.Errorf("%s: exit code %d, want %d", tc.name, code, ExitUsage)
			}
		}
	})
}
