package cli

import (
	"strings"
	"testing"
)

// TestTopicsCommand: subscribe, publish (twice with a key), list the log,
// replay and unsubscribe through the CLI against a real server.
func TestTopicsCommand(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key}
	mustRun := func(want string, args ...string) string {
		t.Helper()
		out, errs, code := run(t, append(append([]string{"topics"}, args...), api...)...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("topics %v: %d %q %q, want %q", args, code, out, errs, want)
		}
		return out
	}
	mustRun("signing secret (shown only once): whsec_", "subscribe", "orders", "billing", "--target-url", "http://127.0.0.1:9/h", "--type", "paid",
		"--max-attempts", "3")
	// The list shows the kinds and the attempts; a password in a URL is
	// masked.
	mustRun("billing  http://127.0.0.1:9/h  paid   3", "subscriptions", "orders")
	mustRun("created subscription orders/nats", "subscribe", "orders", "nats", "--target-url", "nats://idem:s3cret@127.0.0.1:4222/orders")
	if out := mustRun("nats://idem:xxxxx@127.0.0.1:4222/orders", "subscriptions", "orders"); strings.Contains(out, "s3cret") {
		t.Fatalf("the list shows the password: %s", out)
	}
	mustRun("deleted subscription orders/nats", "unsubscribe", "orders", "nats")
	mustRun("1 deliveries (existing: false)", "publish", "orders", "--key", "k1", "--type", "paid", "--partition-key", "o1", "--payload", `{"a":1}`, "--metadata", `{"region":"eu"}`)
	mustRun("(existing: true)", "publish", "orders", "--key", "k1", "--type", "paid", "--partition-key", "o1", "--payload", `{"a":1}`, "--metadata", `{"region":"eu"}`)
	// The key with another event is refused (exit 4), nothing published.
	if _, errs, code := run(t, append([]string{"topics", "publish", "orders", "--key", "k1", "--type", "paid"}, api...)...); code != 4 || !strings.Contains(errs, "422") {
		t.Fatalf("key reused with another event: %d %q", code, errs)
	}
	mustRun("0 deliveries", "publish", "orders", "--type", "created")
	mustRun("o1", "events", "orders", "--type", "paid")
	mustRun("replayed 1 events: 1 deliveries", "replay", "orders", "--metadata", "region=eu", "--subscription", "billing")
	mustRun("deleted subscription orders/billing", "unsubscribe", "orders", "billing")
}
