package idem_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// TestAutoKeyValidate: an AutoKey whose action cannot make a valid key is
// refused by Validate, naming the action, and by NewClient, naming the
// queue or kind, instead of failing every enqueue of its jobs.
func TestAutoKeyValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		action string
		ok     bool
	}{
		{"none: the kind", "", true},
		{"seed 002's action", "send_email", true},
		// A derived key is "_" + "_" + action + "_" + 16 hex digits with an empty tenant and user.
		{"the longest that fits a key", strings.Repeat("a", idem.MaxKeyLength-19), true},
		{"one byte too long", strings.Repeat("a", idem.MaxKeyLength-18), false},
		{"a control character", "send\temail", false},
		{"outside printable ASCII", "envoyer_é", false},
		{"invalid UTF-8", "send\xffemail", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := idem.AutoKey{Action: tc.action}
			err := a.Validate()
			if tc.ok != (err == nil) || !tc.ok && invalidField(err) != "action" {
				t.Fatalf("Validate: %v, want ok %v or an error naming action", err, tc.ok)
			}
			_, err = idem.NewClient(testStore(t), &idem.Config{AutoKeyByKind: map[string]idem.AutoKey{"send_email": a}})
			if tc.ok != (err == nil) || !tc.ok && !strings.Contains(err.Error(), `kind "send_email"`) {
				t.Fatalf("NewClient: %v, want ok %v or an error naming the kind", err, tc.ok)
			}
		})
	}
}
