package cli

import (
	"strings"
	"testing"
)

// TestNotFoundHintNamesTheListCommand: a 404 of a client command hints at
// the command that lists what exists for that resource and at the tenant
// (the usual reason an id that exists answers 404), not always at
// `idem jobs list` and `idem dlq list`, which list neither targets nor
// schedules nor batches.
func TestNotFoundHintNamesTheListCommand(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"targets", "delete", "nope"}, []string{"`idem targets list`", "--tenant"}},
		{[]string{"schedules", "trigger", "nope"}, []string{"`idem schedules list`", "--tenant"}},
		{[]string{"batch", "get", "999"}, []string{"batch", "--tenant"}},
		{[]string{"jobs", "get", "999"}, []string{"`idem jobs list`", "--tenant"}},
		{[]string{"dlq", "resolve", "999"}, []string{"`idem dlq list`", "--tenant"}},
	} {
		_, errs, code := run(t, append(c.args, api...)...)
		if code != ExitNotFound {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, ExitNotFound, errs)
			continue
		}
		_, hint, _ := strings.Cut(errs, "hint: ")
		for _, w := range c.want {
			if !strings.Contains(hint, w) {
				t.Errorf("%v: hint %q lacks %q", c.args, hint, w)
			}
		}
		if c.args[0] != "jobs" && c.args[0] != "dlq" && strings.Contains(hint, "idem jobs list") {
			t.Errorf("%v: hint %q points at jobs", c.args, hint)
		}
	}
}

// TestNotFoundHintOfAPIKeys: revoking an unknown key id hints at
// `idem apikey list`, not at jobs.
func TestNotFoundHintOfAPIKeys(t *testing.T) {
	t.Parallel()
	_, _, db := cliServer(t)
	_, errs, code := run(t, "apikey", "revoke", "key_nope", "--database", db)
	if code != ExitNotFound || !strings.Contains(errs, "hint: ") || !strings.Contains(errs, "`idem apikey list`") ||
		strings.Contains(errs, "idem jobs list") {
		t.Fatalf("exit %d, stderr %q: want %d and a hint naming `idem apikey list`", code, errs, ExitNotFound)
	}
}

// TestBadTenantFlag: a --tenant (or IDEM_TENANT) no tenant can have is a
// usage error naming the flag and the variable, before any request; the
// server's 400 named its Idem-Tenant header, which the user never wrote.
func TestBadTenantFlag(t *testing.T) {
	t.Parallel()
	_, errs, code := run(t, "jobs", "list", "--url", "http://127.0.0.1:1", "--api-key", "idem_x", "--tenant", "acme corp")
	if code != ExitUsage || !strings.Contains(errs, `--tenant (or IDEM_TENANT) "acme corp"`) || strings.Contains(errs, "refused") {
		t.Fatalf("exit %d, stderr %q: want %d naming --tenant and IDEM_TENANT", code, errs, ExitUsage)
	}
}
