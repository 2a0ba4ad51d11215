package idem_test

import (
	"encoding/json"
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

// TestAutoKeyErrorNamesThePart: a job whose derived key cannot be made is
// refused naming the part at fault — the metadata's user (not ASCII, or so
// long the key would not fit), or the tenant (a '_', which seed 002's
// format cannot hold) — never idempotency_key, a field the caller did not
// send; and nothing is written.
func TestAutoKeyErrorNamesThePart(t *testing.T) {
	t.Parallel()
	b := setup(t, &idem.Config{AutoKeyByQueue: map[string]idem.AutoKey{"mail": {}}})
	ctx := t.Context()
	for _, tc := range []struct {
		name, tenant, user, field string
	}{
		{"user not ASCII", "default", "José", "metadata.user"},
		{"user too long for a key", "default", strings.Repeat("u", idem.MaxKeyLength), "metadata.user"},
		{"user with '_'", "default", "a_b", "metadata.user"},
		{"tenant with '_'", "acme_corp", "u1", "tenant"},
	} {
		meta, err := json.Marshal(map[string]string{"user": tc.user})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "send", Args: json.RawMessage(`{"n":1}`),
			Opts: &idem.EnqueueOpts{Queue: "mail", Tenant: tc.tenant, Metadata: meta}})
		if got := invalidField(err); got != tc.field {
			t.Errorf("%s: error %v names %q, want %q", tc.name, err, got, tc.field)
		}
	}
	if jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{}); err != nil || len(jobs) != 0 {
		t.Fatalf("refused enqueues wrote %d jobs (%v)", len(jobs), err)
	}
}
