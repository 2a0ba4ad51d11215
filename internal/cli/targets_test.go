package cli

import (
	"strings"
	"testing"
)

// TestTargetsCommand: put prints a generated secret once, list never shows
// it, delete removes the target; a bad URL is refused naming the field.
func TestTargetsCommand(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	out, errs, code := run(t, append([]string{"targets", "put", "orders", "--target-url", "http://127.0.0.1:9/hook", "--queue", "hooks", "--timeout", "5s"}, api...)...)
	if code != 0 || !strings.Contains(out, "created target orders") || !strings.Contains(out, "signing secret (shown only once): whsec_") {
		t.Fatalf("put: %d %q %q", code, out, errs)
	}
	secret := out[strings.Index(out, "whsec_"):]
	out, errs, code = run(t, append([]string{"targets", "list"}, api...)...)
	if code != 0 || !strings.Contains(out, "orders") || !strings.Contains(out, "hooks") || strings.Contains(out, strings.TrimSpace(secret)) {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	_, errs, code = run(t, append([]string{"targets", "put", "bad", "--target-url", "ftp://x", "--queue", "q"}, api...)...)
	if code == 0 || !strings.Contains(errs, "url") {
		t.Fatalf("bad url: %d %q", code, errs)
	}
	out, errs, code = run(t, append([]string{"targets", "delete", "orders"}, api...)...)
	if code != 0 || !strings.Contains(out, "deleted target orders") {
		t.Fatalf("delete: %d %q %q", code, out, errs)
	}
}
